"""KVSwitch on Mininet: the rack runner (``kvswitch rack``, ``python -m kvsrack``).

One module per job, so that another topology (a fabric of spines and leaves) is another
topology function and its own launch sequence over the same parts:

- :mod:`kvsrack.topology`: who is in the network and how it is wired (pure data; the rack file);
- :mod:`kvsrack.network`: a topology as a Mininet network (hosts, links, ARP, offloads);
- :mod:`kvsrack.switches`: the P4 switch processes as Mininet switch nodes;
- :mod:`kvsrack.procs`: process supervision (every PID recorded, stopped in reverse order);
- :mod:`kvsrack.launchers`: each role's command line and life cycle (backends, agents, the
  controller, the load generator, the history clients);
- :mod:`kvsrack.deployment`: a topology up and torn down (folders, network, processes), the
  life cycle a rack (and a fabric) shares;
- :mod:`kvsrack.rack`: one rack: its switch, agents and controller (a context manager);
- :mod:`kvsrack.fabric`: a leaf-spine fabric: its switches, rack controllers and fabric
  controller, lambda per period over all servers;
- :mod:`kvsrack.scenarios`: workloads and fault schedules (servers, a fabric's switches) run
  against a running rack or fabric;
- :mod:`kvsrack.variants`: TESTS ONLY, broken fabric controllers the fabric test must catch;
- :mod:`kvsrack.history`: the history client started inside the client hosts;
- :mod:`kvsrack.cli`: the command line.

The package lives in the project's ``mininet/`` folder (pyproject.toml maps it) under a name that
does not shadow Debian's ``mininet``. The product (protocol, controller, agent, client, softswitch)
never imports it; only the command line and ``kvswitch demo`` start it.
"""
