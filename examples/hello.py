# The smallest run: prints where it is and what it may touch.
import os
import sys

print("Hello from the sandbox!")
print(f"python {sys.version.split()[0]}, pid {os.getpid()}, cwd {os.getcwd()}")
