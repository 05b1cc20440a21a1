package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateCronJob is admission's check (the book's webhook: the schedule
// parses, the name leaves room for the Job suffix) plus upstream's API
// validation (no TZ in the schedule, a known time zone, non-negative
// numbers, a runnable Job template), worded as the API server words it.
// Reconcile runs it on what is stored, which admission may not have seen.
func validateCronJob(cj, _ *CronJob) field.ErrorList {
	var errs field.ErrorList
	if len(cj.Name) > maxNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cj.Name, fmt.Sprintf("must be no more than %d characters", maxNameLength)))
	}
	spec := field.NewPath("spec")
	errs = append(errs, validateSchedule(spec.Child("schedule"), deref(cj.Spec.Schedule))...)
	if cj.Spec.TimeZone != nil {
		errs = append(errs, validateTimeZone(spec.Child("timeZone"), *cj.Spec.TimeZone)...)
	}
	if p := cj.Spec.ConcurrencyPolicy; p != nil && *p != "" && *p != allowConcurrent && *p != forbidConcurrent && *p != replaceConcurrent {
		errs = append(errs, field.NotSupported(spec.Child("concurrencyPolicy"), *p, []string{allowConcurrent, forbidConcurrent, replaceConcurrent}))
	}
	for _, n := range []struct {
		name  string
		value *int64
	}{
		{"startingDeadlineSeconds", cj.Spec.StartingDeadlineSeconds},
		{"successfulJobsHistoryLimit", cj.Spec.SuccessfulJobsHistoryLimit},
		{"failedJobsHistoryLimit", cj.Spec.FailedJobsHistoryLimit},
	} {
		if n.value != nil && *n.value < 0 {
			errs = append(errs, field.Invalid(spec.Child(n.name), *n.value, "must be greater than or equal to 0"))
		}
	}
	return append(errs, validateJobTemplate(spec.Child("jobTemplate"), cj.Spec.JobTemplate)...)
}

func validateSchedule(path *field.Path, schedule string) field.ErrorList {
	if schedule == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	if _, err := parseSchedule(schedule, time.UTC); err != nil {
		errs = append(errs, field.Invalid(path, schedule, err.Error()))
	}
	// Upstream refuses a zone inside the schedule on create: spec.timeZone says it.
	if strings.Contains(schedule, "TZ") {
		errs = append(errs, field.Invalid(path, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

var zonePart = regexp.MustCompile(`^[A-Za-z0-9._+-]{1,14}$`)

// validateTimeZone is upstream's validateTimeZone.
func validateTimeZone(path *field.Path, zone string) field.ErrorList {
	if zone == "" {
		return field.ErrorList{field.Invalid(path, zone, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(zone, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !zonePart.MatchString(part) {
			return field.ErrorList{field.Invalid(path, zone, "unknown time zone "+zone)}
		}
	}
	if strings.EqualFold(zone, "Local") {
		return field.ErrorList{field.Invalid(path, zone, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")}
	}
	if _, err := loadZone(zone); err != nil {
		return field.ErrorList{field.Invalid(path, zone, err.Error())}
	}
	return nil
}

// validateJobTemplate holds the parts of upstream's Job validation that
// decide whether a Job can be created at all; the API server checks the
// rest when the Job is created.
func validateJobTemplate(path *field.Path, t *JobTemplate) field.ErrorList {
	if t == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	pod := path.Child("spec", "template", "spec")
	if len(t.Spec.Template.Spec.Containers) == 0 {
		errs = append(errs, field.Required(pod.Child("containers"), ""))
	}
	switch policy := string(t.Spec.Template.Spec.RestartPolicy); policy {
	case "OnFailure", "Never":
	case "":
		errs = append(errs, field.Required(pod.Child("restartPolicy"), `supported values: "OnFailure", "Never"`))
	default:
		errs = append(errs, field.NotSupported(pod.Child("restartPolicy"), policy, []string{"OnFailure", "Never"}))
	}
	return errs
}
