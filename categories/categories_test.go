package categories_test

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/retry"
)

// seedEnum reads the RetryCategory enum copied verbatim from seed 002:
// member name → code, in the seed's order.
func seedEnum(t *testing.T) (names []string, codes map[string]string) {
	t.Helper()
	f, err := os.Open("testdata/seed002_enum.py")
	require.NoError(t, err)
	defer f.Close()
	re := regexp.MustCompile(`^\s+([A-Z_]+) = "([A-Z_]+)"$`)
	codes = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
			codes[m[1]] = m[2]
		}
	}
	require.NoError(t, sc.Err())
	return names, codes
}

func TestCodesMatchSeed(t *testing.T) {
	names, codes := seedEnum(t)
	require.Len(t, names, 17)
	got := categories.All()
	require.Len(t, got, 17)
	for i, name := range names {
		require.Equal(t, codes[name], string(got[i]), "category %d (%s)", i, name)
		require.Equal(t, name, categories.Name(got[i]))
	}
	require.Equal(t, categories.Category("REPLAY_REPLAY_PROCESSING"), categories.ReplayProcessing)
	require.Equal(t, categories.Category("REPLAY_REPLAY_VALIDATION"), categories.ReplayValidation)
}

func TestDefaultsMatchSeedMatrix(t *testing.T) {
	f, err := os.Open("testdata/seed002_matrix.md")
	require.NoError(t, err)
	defer f.Close()
	_, codes := seedEnum(t)

	seconds := func(s string) time.Duration {
		v, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
		require.NoError(t, err, s)
		return time.Duration(v * float64(time.Second))
	}
	defaults := categories.Defaults()
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(strings.Trim(sc.Text(), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) != 7 || cells[0] == "Operation Category" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows++
		code, ok := codes[cells[0]]
		require.True(t, ok, "matrix row %q is not in the enum", cells[0])
		t.Run(cells[0], func(t *testing.T) {
			got, ok := defaults[categories.Category(code)]
			require.True(t, ok)
			attempts, err := strconv.Atoi(cells[1])
			require.NoError(t, err)
			mult, err := strconv.ParseFloat(strings.TrimSuffix(cells[4], "x"), 64)
			require.NoError(t, err)
			jitter, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(cells[5], "±"), "%"), 64)
			require.NoError(t, err)
			want := retry.Policy{
				MaxAttempts:  attempts,
				BaseDelay:    seconds(cells[2]),
				MaxDelay:     seconds(cells[3]),
				Multiplier:   mult,
				Jitter:       retry.JitterProportional,
				JitterFactor: jitter / 100,
			}
			require.Equal(t, want, got)
			require.NoError(t, got.Validate())
		})
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 17, rows)
	require.Len(t, defaults, 17)
}

func TestDefaultsIsAFreshCopy(t *testing.T) {
	a := categories.Defaults()
	a[categories.KVGet] = retry.Policy{}
	require.Equal(t, 3, categories.Defaults()[categories.KVGet].MaxAttempts)
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want categories.Category
		err  bool
	}{
		{in: "RETRY_KV_GET", want: categories.KVGet},
		{in: "KV_GET", want: categories.KVGet},
		{in: "REPLAY_REPLAY_PROCESSING", want: categories.ReplayProcessing},
		{in: "REPLAY_PROCESSING", want: categories.ReplayProcessing},
		{in: "RETRY_REPLAY_PROCESSING", err: true},
		{in: "retry_kv_get", err: true},
		{in: "", err: true},
		{in: "RETRY_KV_GET ", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := categories.Parse(tt.in)
			if tt.err {
				require.ErrorIs(t, err, categories.ErrUnknown)
				var ue *categories.UnknownError
				require.ErrorAs(t, err, &ue)
				require.Equal(t, tt.in, ue.Input)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	require.False(t, categories.Known("RETRY_SOMETHING_ELSE"))
	require.Equal(t, "", categories.Name("RETRY_SOMETHING_ELSE"))
}

func TestNewManagerUsesMatrix(t *testing.T) {
	m, err := categories.NewManager()
	require.NoError(t, err)
	require.Equal(t, categories.Defaults()[categories.NATSConnect], m.Policy(categories.NATSConnect))
	require.Equal(t, retry.DefaultPolicy(), m.Policy("RETRY_UNKNOWN"))
}
