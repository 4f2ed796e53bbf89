"""The architectures the switch runs (v1model, TNA): each recognises its package, translates its
externs and runs its packet path over the switch's device state."""
