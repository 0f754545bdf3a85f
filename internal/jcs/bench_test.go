package jcs

import (
	"encoding/json"
	"testing"
)

func BenchmarkMarshal(b *testing.B) {
	cases := []struct {
		name string
		v    any
	}{
		{"small map", map[string]any{"operation": "kill_switch_update", "tenant_id": "tenant-123", "correlation_id": "corr-456", "additional_params": map[string]any{"switch_name": "all_execution"}}},
		{"floats", []any{0.1, 1e21, 1.5e-7, 333333333.33333329, 123456789.0}},
		{"json.Number", []any{json.Number("123"), json.Number("4.50"), json.Number("1E30")}},
		{"struct via encoding/json", point{X: 1.5, Y: 2, Label: "p"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 512)
			for b.Loop() {
				var err error
				if buf, err = Append(buf[:0], c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
