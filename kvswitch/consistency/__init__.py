"""The single-key consistency protocol in the product (docs/protocol.md "Consistency"): its rules
(:mod:`.rules`), the bounded exhaustive explorers that check them, one rack and the fabric's
write path (:mod:`.explore`, :mod:`.explore_fabric`), and the linearizability checker of
histories (:mod:`.lincheck`), and the explorers' command lines, ``kvswitch sim explore[-fabric]``
(:mod:`.explore_cli`). Nothing here imports bench/."""
