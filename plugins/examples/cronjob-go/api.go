package main

import (
	"encoding/json"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The CronJob API (batch.tutorial.kubebuilder.io/v1), the kubebuilder
// book's types with upstream's timeZone and lastSuccessfulTime. The CRD
// installed is plugins/cronjob's crd.json (crd.json here is a copy, which
// a test keeps equal), so both builds serve one API.
//
// The plugin reads what is stored, which admission may not have checked:
// numbers are int64 (a history limit beyond int32 reaches validate and is
// reported, instead of failing the read) and the policy is a plain string.

const (
	scheduledAtAnnotation       = "batch.tutorial.kubebuilder.io/scheduled-at"
	upstreamScheduledAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"
	validCondition              = "Valid"
	maxNameLength               = 52 // a Job name is <cronjob>-<minutes>: 63 less an 11-character suffix
	allowConcurrent             = "Allow"
	forbidConcurrent            = "Forbid"
	replaceConcurrent           = "Replace"
)

// CronJob is the Schema for the cronjobs API.
type CronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CronJobSpec    `json:"spec,omitempty"`
	Status            *CronJobStatus `json:"status,omitempty"`
}

// CronJobSpec defines the desired state of CronJob.
type CronJobSpec struct {
	Schedule                   *string      `json:"schedule,omitempty"`
	TimeZone                   *string      `json:"timeZone,omitempty"`
	StartingDeadlineSeconds    *int64       `json:"startingDeadlineSeconds,omitempty"`
	ConcurrencyPolicy          *string      `json:"concurrencyPolicy,omitempty"`
	Suspend                    *bool        `json:"suspend,omitempty"`
	JobTemplate                *JobTemplate `json:"jobTemplate,omitempty"`
	SuccessfulJobsHistoryLimit *int64       `json:"successfulJobsHistoryLimit,omitempty"`
	FailedJobsHistoryLimit     *int64       `json:"failedJobsHistoryLimit,omitempty"`
}

// JobTemplate is the book's batchv1.JobTemplateSpec, read typed, and the
// template's spec as stored: a new Job gets the spec exactly as the user
// wrote it (as upstream's getJobFromTemplate2 copies it), not re-encoded
// through the Go types, which would add their zero values ("resources":
// {}, "metadata": {"creationTimestamp": null}).
type JobTemplate struct {
	batchv1.JobTemplateSpec
	rawSpec json.RawMessage
}

func (t *JobTemplate) UnmarshalJSON(b []byte) error {
	var raw struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	t.rawSpec = raw.Spec
	return json.Unmarshal(b, &t.JobTemplateSpec)
}

// CronJobStatus defines the observed state of CronJob.
type CronJobStatus struct {
	Active             []corev1.ObjectReference `json:"active,omitempty"`
	LastScheduleTime   *metav1.Time             `json:"lastScheduleTime,omitempty"`
	LastSuccessfulTime *metav1.Time             `json:"lastSuccessfulTime,omitempty"`
	Conditions         []metav1.Condition       `json:"conditions,omitempty"`
}

// UnmarshalJSON reads conditions leniently: one written by someone else
// that lacks what ours need is skipped, not a reason to refuse the parent.
func (s *CronJobStatus) UnmarshalJSON(b []byte) error {
	type plain CronJobStatus
	var in struct {
		plain
		Conditions json.RawMessage `json:"conditions"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*s = CronJobStatus(in.plain)
	s.Conditions = nil
	var list []json.RawMessage
	if json.Unmarshal(in.Conditions, &list) != nil {
		return nil
	}
	for _, text := range list {
		var c metav1.Condition
		if json.Unmarshal(text, &c) == nil && c.Type != "" && c.Status != "" {
			s.Conditions = append(s.Conditions, c)
		}
	}
	return nil
}

func (c *CronJob) stored() CronJobStatus {
	if c.Status == nil {
		return CronJobStatus{}
	}
	return *c.Status
}

func (c *CronJob) policy() string {
	if c.Spec.ConcurrencyPolicy == nil || *c.Spec.ConcurrencyPolicy == "" {
		return allowConcurrent
	}
	return *c.Spec.ConcurrencyPolicy
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
