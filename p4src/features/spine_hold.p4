// The spine's hold after a restart (KVS_SPINE, kvswitch_spine.p4 and kvswitch_spine_tna.p4;
// docs/fabric.md "Failures", docs/protocol.md F7 "Faults"). Both builds share this control; the
// top level drops what it holds with its target's drop.
//
// Table (fabric controller contract):
//   SpineHoldTable  keyless; its default action is `hold` when the program starts: a spine that
//                   restarts forwards no well-formed KVSwitch message (plain IP passes) until the
//                   fabric controller reinstalled it (its static entries, its epoch), gathered
//                   its rotated keys into their origins and set the default to NoAction
//                   (controller/fabric_ops.py spine_ready). A restarted spine has no entry for
//                   its rotated keys: without the hold it would forward their Gets to their
//                   origins as plain IP, and a rotated key's origin may hold an older value than
//                   the latest acknowledged one (F7: its writes went to other holders).
#ifndef KVSWITCH_SPINE_HOLD_P4
#define KVSWITCH_SPINE_HOLD_P4

control SpineHold(in kvs_meta_t meta, out bool held) {
    @name("hold")
    action hold() {
        held = true;
    }

    @name("SpineHoldTable")
    table spine_hold_table {
        actions = {
            hold;
            NoAction;
        }
        default_action = hold();
        size = 1;
    }

    apply {
        held = false;
        if (meta.kvs_ok) {
            spine_hold_table.apply();
        }
    }
}

#endif  // KVSWITCH_SPINE_HOLD_P4
