"""JVM options for the tests' short-lived JVMs: a dbt or crash-test process's Spark driver, a test
cluster's driver and executors, the Flink oracle's gateway.

Such a JVM lives seconds to a few minutes, too short for HotSpot's C2 compiler to earn back the CPU it
spends, and two cores are shared by three test processes: C1 alone and the serial collector cost
less. Measured here: the conformance cases on the test cluster took 108-111 CPU-s with these options
on its executors against 148-170 without (wall 56-62 s against 89-95 s), 76-77 CPU-s with them on its
driver as well (102-106 without), and a Flink oracle call of 17 cases 16-18 CPU-s against 27-36.
A test session's own driver lives for the whole run and keeps C2 (`conftest.spark`). The benchmarks
use neither: they measure with each system's defaults.
"""

SHORT_LIVED = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
