"""What the black-box test suites share: one place for each helper.

The integration suite (tests/integration, through harness.py), the attack suite
(tests/security, through attack.py), the documentation, load and stdlib tests drive the built
binary from the host. What they need of it is here, once, stdlib only (Debian's
/usr/bin/python3; python3-jsonschema for the result schema):

  env            where the binary and the repository are, who runs it (PYSANDBOX_AS, setpriv
                 as nobody), the sandbox's identities, time scaling for sanitizer builds
  result_schema  every --json result and session line checked against the result schema
  files          temp directories (removed at exit), files, markers and secrets, cleanups
  procfs         the host's /proc: processes carrying a marker, their status, namespaces,
                 descriptors, sockets and mounts; waiting for a condition to settle
  running        running pysandbox to completion with a timeout (Result) or in the
                 background (Running)
  seccomp        the seccomp filters the kernel holds for a process, and a BPF evaluator
  fronts         one hostile script through every front (run, session, batch, batch --fork,
                 mcp), watched from the host (Sandbox, SessionSandbox)
  mounted_env    PYSANDBOX_WITH_ENV: a package environment mounted in every run of the attack
                 harness, checked from the host (mounted, and unchanged)
  wheels         wheels and PEP 503 indexes the package tests make themselves
  host           host fixtures: victims, canaries, file states, interfaces, listeners, locks,
                 tmpfs mounts, another /etc/hosts

A test module puts tests/ on sys.path (harness.py and attack.py do it for theirs) and imports
``support.<module>``.
"""
