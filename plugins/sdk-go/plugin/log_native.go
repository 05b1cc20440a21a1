//go:build !wasip1

package plugin

import (
	"fmt"
	"os"
)

func writeLog(level Level, message string) {
	fmt.Fprintf(os.Stderr, "%s %s\n", [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}[level], message)
}
