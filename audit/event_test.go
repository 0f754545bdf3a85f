package audit

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestEventValidate(t *testing.T) {
	valid := Event{Type: TypeRetryAttempt, Category: "RETRY_NATS_PUBLISH", EventID: "id", Timestamp: seedTime}
	tests := []struct {
		name      string
		edit      func(*Event)
		wantField string
	}{
		{name: "valid", edit: func(*Event) {}},
		{name: "other type is valid", edit: func(e *Event) { e.Type = "manual_override" }},
		{name: "missing type", edit: func(e *Event) { e.Type = "" }, wantField: "event_type"},
		{name: "missing category", edit: func(e *Event) { e.Category = "" }, wantField: "retry_category"},
		{name: "missing event id", edit: func(e *Event) { e.EventID = "" }, wantField: "event_id"},
		{name: "zero timestamp", edit: func(e *Event) { e.Timestamp = time.Time{} }, wantField: "timestamp"},
		{name: "first missing field wins", edit: func(e *Event) { *e = Event{} }, wantField: "event_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := valid
			tt.edit(&e)
			err := e.Validate()
			if tt.wantField == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidEvent)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tt.wantField, verr.Field)
			require.Equal(t, "audit: invalid event: "+tt.wantField+" is required", err.Error())
		})
	}
}

func TestValidationErrorWrapped(t *testing.T) {
	err := errors.Join(errors.New("other"), Event{}.Validate())
	require.ErrorIs(t, err, ErrInvalidEvent)
}

func TestNewEventID(t *testing.T) {
	seen := make(map[string]bool)
	prev := ""
	for range 1000 {
		id := NewEventID()
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(7), u.Version())
		require.Equal(t, u.String(), id, "canonical form")
		require.False(t, seen[id], "duplicate %s", id)
		seen[id] = true
		// UUIDv7s from one process sort by creation order.
		require.Greater(t, id, prev)
		prev = id
	}
}
