# The mean of a list: prints "Average value: 30.0".
values = [10, 20, 30, 40, 50]

print(f"Average value: {sum(values) / len(values)}")
