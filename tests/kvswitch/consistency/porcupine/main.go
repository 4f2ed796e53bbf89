// Command porcupine-check reads key-value histories (one JSON array of operations per line on stdin)
// and prints, per line, whether Porcupine finds the history linearizable ("true"/"false"). It is the
// independent reference that tests/kvswitch/consistency cross-checks KVSwitch's own checker against.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/anishathalye/porcupine"
)

// op is one operation as the Python side writes it. Ret < 0 means "no reply" (unknown outcome).
type op struct {
	Kind   string  `json:"kind"`
	Key    string  `json:"key"`
	Call   int64   `json:"call"`
	Ret    int64   `json:"ret"`
	Value  *string `json:"value"`
	Output *string `json:"output"`  // get: value read (null: not found)
	Exists *bool   `json:"exists"`  // delete: server said the key existed (null: either)
	Client int     `json:"client"`
}

type input struct {
	kind  string
	value *string
}

type output struct {
	unknown bool
	value   *string
	exists  *bool
}

func same(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// register is the sequential specification of one key: its value, or nil when absent.
var register = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range history {
			k := o.Metadata.(string)
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], o)
		}
		var parts [][]porcupine.Operation
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() interface{} { return (*string)(nil) },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		s := state.(*string)
		i := in.(input)
		o := out.(output)
		switch i.kind {
		case "set":
			return true, i.value
		case "delete":
			if o.unknown || o.exists == nil {
				return true, (*string)(nil)
			}
			return *o.exists == (s != nil), (*string)(nil)
		default: // get
			if o.unknown {
				return true, s
			}
			return same(o.value, s), s
		}
	},
	Equal: func(a, b interface{}) bool { return same(a.(*string), b.(*string)) },
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for scanner.Scan() {
		var ops []op
		if err := json.Unmarshal(scanner.Bytes(), &ops); err != nil {
			fmt.Fprintln(os.Stderr, "bad history:", err)
			os.Exit(2)
		}
		history := make([]porcupine.Operation, 0, len(ops))
		for _, o := range ops {
			ret := o.Ret
			if ret < 0 {
				ret = math.MaxInt64
			}
			history = append(history, porcupine.Operation{
				ClientId: o.Client,
				Input:    input{kind: o.Kind, value: o.Value},
				Call:     o.Call,
				Output:   output{unknown: o.Ret < 0, value: o.Output, exists: o.Exists},
				Return:   ret,
				Metadata: o.Key,
			})
		}
		fmt.Println(porcupine.CheckOperations(register, history))
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
