package main

import (
	"errors"
	"time"

	"github.com/robfig/cron/v3"
)

// Which scheduled run is due: upstream's mostRecentScheduleTime, with an
// exact search for the most recent activation (as plugins/cronjob's
// runs.rs, whose fixtures this plugin answers). Upstream estimates a
// starting point from the gap between the first two activations; for
// irregular schedules after a long outage that point can lie past the real
// most recent run. The estimate is kept for what it decides (more than 100
// missed: warn), and the run is found by searching back from now in
// doubling windows.

type missed int

const (
	missedNone missed = iota
	missedFew
	missedMany
)

type due struct {
	mostRecent *time.Time
	missed     missed
}

// errNoInterval is upstream's wording for a schedule with no usable activations.
var errNoInterval = errors.New("time difference between two schedules is less than 1 second")

// maxStepsPerWindow caps Next calls per search window; real schedules never reach it.
const maxStepsPerWindow = 100_000

func mostRecent(s cron.Schedule, earliest, now time.Time) (due, error) {
	t1, ok := nextAfter(s, earliest)
	if !ok {
		return due{}, errNoInterval
	}
	if now.Before(t1) {
		return due{}, nil
	}
	t2, ok := nextAfter(s, t1)
	if !ok || now.Before(t2) {
		return due{mostRecent: &t1}, nil
	}
	interval := int64(t2.Sub(t1) / time.Second)
	if interval < 1 {
		return due{}, errNoInterval
	}
	estimate := int64(now.Sub(t1)/time.Second)/interval + 1
	m := missedFew
	if estimate > 100 {
		m = missedMany
	}
	var latest time.Time
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		// Activations of @every are earliest + k*delay: anchored, not absolute.
		delay := int64(every.Delay / time.Second)
		elapsed := int64(now.Sub(earliest) / time.Second)
		latest = earliest.Add(time.Duration(elapsed/delay*delay) * time.Second)
	} else if found, ok := searchBack(s, earliest, now, interval); ok {
		latest = found
	} else {
		latest = t2
	}
	return due{mostRecent: &latest, missed: m}, nil
}

// searchBack finds the latest activation in (earliest, now] over windows of
// 1, 2, 4... intervals back from now.
func searchBack(s cron.Schedule, earliest, now time.Time, interval int64) (time.Time, bool) {
	span := max(interval, 1)
	for {
		start := now.Add(-time.Duration(span) * time.Second)
		if start.Before(earliest) {
			start = earliest
		}
		var latest time.Time
		found := false
		at, ok := nextAfter(s, start)
		for steps := 0; ok && !at.After(now); {
			latest, found = at, true
			if steps++; steps >= maxStepsPerWindow {
				break
			}
			at, ok = nextAfter(s, at)
		}
		if found || start.Equal(earliest) {
			return latest, found
		}
		span *= 2
	}
}

// nextRun is when to look again: the first activation after the most
// recent one (or after earliest when none is due), as upstream's
// nextScheduleTimeDuration. @every stays anchored to its previous run.
func nextRun(s cron.Schedule, earliest, now time.Time) (time.Time, bool) {
	anchor := earliest
	d, err := mostRecent(s, earliest, now)
	switch {
	case err != nil:
		anchor = now
	case d.mostRecent != nil:
		anchor = *d.mostRecent
	}
	return nextAfter(s, anchor)
}
