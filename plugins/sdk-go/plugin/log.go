package plugin

import "fmt"

// Level is a log line's severity (the contract's `log.level`).
type Level uint32

const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

// Logf writes one line to the host's log, tagged with the plugin and the
// parent being reconciled (to standard error under `go test`).
func Logf(level Level, format string, args ...any) {
	writeLog(level, fmt.Sprintf(format, args...))
}
