package audit

import "unicode/utf8"

// MaxMessageBytes bounds the length, in bytes, of the exception messages
// carried by an event (exception_message, final_exception_message) once
// passed through TruncateMessage. It keeps audit messages small whatever an
// error's text holds. The bound includes the truncation marker.
const MaxMessageBytes = 1024

// truncationMarker ends a message that TruncateMessage cut: "…" (U+2026,
// 3 bytes in UTF-8).
const truncationMarker = "…"

// TruncateMessage returns s unchanged when it is at most MaxMessageBytes
// bytes long. Otherwise it cuts s at a UTF-8 rune boundary and appends "…",
// so that the result is at most MaxMessageBytes bytes and never ends in a
// partial rune of valid UTF-8. It never fails.
func TruncateMessage(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes - len(truncationMarker)
	// s[cut] is the first byte dropped; back up until it starts a rune, so
	// no rune is split. Valid UTF-8 needs at most UTFMax-1 steps.
	for i := cut; i > cut-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			cut = i
			break
		}
	}
	return s[:cut] + truncationMarker
}
