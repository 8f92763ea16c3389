# What a model sometimes writes: it computes, then reaches for the shell to tidy up.
# `pysandbox check` finds the call before anything runs; `pysandbox run` refuses it when it
# happens (and the kernel layers would stop the shell even without that).
import os as tools

total = sum(n * n for n in range(10))
print("sum of squares:", total)
tools.system("rm -rf /tmp/cache")
