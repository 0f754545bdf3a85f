package jobs

import (
	"encoding/json"
	"testing"
)

func BenchmarkRecordCodec(b *testing.B) {
	r := codecRecords()[1]
	r.Policy = nil
	r.Run.Error = "dial tcp 127.0.0.1:4222: connection refused"
	r.History[0].Error = r.Run.Error
	r.Payload = []byte(`{"report":"daily"}`)
	doc, _ := r.encode()
	b.Run("encode/fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = r.encode()
		}
	})
	b.Run("encode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&r)
		}
	})
	b.Run("decode/fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = decodeRecord(r.ID, 1, doc)
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var x Record
			_ = json.Unmarshal(doc, &x)
		}
	})
}
