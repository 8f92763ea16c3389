# The sum of the primes below 1000, by the sieve of Eratosthenes: prints 76127.
LIMIT = 1000

is_prime = [True] * LIMIT
is_prime[0] = is_prime[1] = False
for n in range(2, int(LIMIT**0.5) + 1):
    if is_prime[n]:
        is_prime[n * n :: n] = [False] * len(range(n * n, LIMIT, n))

print(sum(n for n in range(LIMIT) if is_prime[n]))
