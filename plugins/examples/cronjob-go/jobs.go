package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"operator-host.dev/sdk-go/plugin"
)

var jobKind = plugin.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}

// childJob is one child Job with what the controller reads from it.
type childJob struct {
	*batchv1.Job
	finished       batchv1.JobConditionType // "", Complete or Failed
	startTime      *time.Time
	completionTime *time.Time
	scheduledAt    *time.Time
}

func newChildJob(job *batchv1.Job) childJob {
	c := childJob{Job: job, finished: finished(job)}
	for _, key := range []string{scheduledAtAnnotation, upstreamScheduledAnnotation} {
		if t, err := time.Parse(time.RFC3339, job.Annotations[key]); err == nil {
			t = t.UTC()
			c.scheduledAt = &t
			break
		}
	}
	if s := job.Status.StartTime; s != nil {
		t := s.UTC()
		c.startTime = &t
	}
	if s := job.Status.CompletionTime; s != nil {
		t := s.UTC()
		c.completionTime = &t
	}
	return c
}

func (j *childJob) isActive() bool       { return j.finished == "" }
func (j *childJob) isBeingDeleted() bool { return j.DeletionTimestamp != nil }
func (j *childJob) ref() plugin.ObjectRef {
	return plugin.ObjectRef{APIVersion: "batch/v1", Kind: "Job", Namespace: j.Namespace, Name: j.Name}
}

// isOurs is true when the Job carries the name this controller gives the
// run it records as scheduled, i.e. this controller created it.
func (j *childJob) isOurs(cronJobName string) bool {
	return j.scheduledAt != nil && j.Name == jobName(cronJobName, *j.scheduledAt)
}

func (j *childJob) reference() corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: j.Namespace, Name: j.Name, UID: j.UID}
}

// finished is upstream's IsJobFinished: a Complete or Failed condition
// with status True (SuccessCriteriaMet and FailureTarget only announce
// them: the Job is still terminating its pods).
func finished(job *batchv1.Job) batchv1.JobConditionType {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return c.Type
		}
	}
	return ""
}

// sortByStartTime is upstream's byJobStartTime: by start time, Jobs that
// never started last, ties by name.
func sortByStartTime(jobs []*childJob) {
	slices.SortStableFunc(jobs, func(a, b *childJob) int {
		switch {
		case a.startTime != nil && b.startTime != nil && !a.startTime.Equal(*b.startTime):
			return a.startTime.Compare(*b.startTime)
		case a.startTime != nil && b.startTime == nil:
			return -1
		case a.startTime == nil && b.startTime != nil:
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// jobName is upstream's getJobName: the CronJob's name and the scheduled
// time in minutes since the epoch, so a run always gets the same name and
// a repeated create of it fails with AlreadyExists instead of running twice.
func jobName(cronJobName string, scheduled time.Time) string {
	minutes := scheduled.Unix() / 60
	if scheduled.Unix() < 0 && scheduled.Unix()%60 != 0 {
		minutes--
	}
	return fmt.Sprintf("%s-%d", cronJobName, minutes)
}

// newJob is what a run creates: the metadata this controller sets and the
// template's spec as stored. The host adds the owner reference.
type newJob struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   newJobMeta      `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

type newJobMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations"`
}

// jobFromTemplate is upstream's getJobFromTemplate2 plus the book's
// annotation: the template's labels and annotations, the deterministic
// name, and the scheduled time twice (the book's key in UTC, upstream's
// in the CronJob's zone).
func jobFromTemplate(cj *CronJob, scheduled time.Time, zone *time.Location) newJob {
	t := cj.Spec.JobTemplate
	annotations := maps.Clone(t.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[scheduledAtAnnotation] = scheduled.UTC().Format(time.RFC3339)
	annotations[upstreamScheduledAnnotation] = scheduled.In(zone).Format(time.RFC3339)
	spec := t.rawSpec
	if len(spec) == 0 || string(spec) == "null" {
		spec = json.RawMessage("{}")
	}
	return newJob{
		APIVersion: "batch/v1",
		Kind:       "Job",
		Metadata:   newJobMeta{Name: jobName(cj.Name, scheduled), Namespace: cj.Namespace, Labels: t.Labels, Annotations: annotations},
		Spec:       spec,
	}
}
