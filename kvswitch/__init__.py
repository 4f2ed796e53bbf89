"""KVSwitch: in-network load balancing for key-value stores.

Sub-packages (each in a top-level folder of the repository):
``kvswitch.protocol`` (the wire format, bottom of the stack), ``kvswitch.client`` (client_lib/python),
``kvswitch.agent`` (server_agent/), ``kvswitch.controller`` (controller/), ``kvswitch.bench``
(bench/: simulator, evaluation and benchmarks). The software switch is the separate, standalone
package ``softswitch``.
"""

__version__ = "0.1.0"
