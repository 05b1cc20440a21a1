package main

import (
	"errors"
	"strings"
	"time"
	_ "time/tzdata" // a plugin has no zoneinfo to read: the tz database is built in

	"github.com/robfig/cron/v3"
)

// loadZone is time.LoadLocation as the controller sees zones: "" is UTC,
// and so is "Local", the controller's zone (kube-controller-manager's
// image runs in UTC; validate refuses "Local" in a spec anyway).
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC", "Local":
		return time.UTC, nil
	}
	return time.LoadLocation(name)
}

// parseSchedule is robfig/cron's ParseStandard, as upstream's CronJob
// controller calls it, in zone unless the text names its own with TZ= or
// CRON_TZ= (robfig would otherwise read time.Local, which differs between
// a test machine and the sandbox).
func parseSchedule(text string, zone *time.Location) (cron.Schedule, error) {
	if text == "" {
		return nil, errors.New("empty spec string")
	}
	if !strings.HasPrefix(text, "TZ=") && !strings.HasPrefix(text, "CRON_TZ=") {
		text = "CRON_TZ=" + zone.String() + " " + text
	}
	return cron.ParseStandard(text)
}

// nextAfter is the first activation strictly after t; ok is false when
// there is none within five years (robfig answers the zero time then,
// e.g. for "0 0 30 2 *").
func nextAfter(s cron.Schedule, t time.Time) (time.Time, bool) {
	next := s.Next(t)
	return next.UTC(), !next.IsZero()
}
