package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"operator-host.dev/sdk-go/plugin"
)

// The kubebuilder book's status conditions, Available, Progressing and
// Degraded, kept beside the plugin's own Valid (and the host's Reconciled)
// as meta.SetStatusCondition keeps them. Every reconcile applies the
// book's table in this order:
//
//	none of the three recorded yet: Progressing=Unknown Reconciling, first
//	children unreadable:           Degraded=True ReconciliationError
//	spec.suspend:                  Available=False Suspended
//	else any failed child Job:     Degraded=True, Available=False JobsFailed
//	else any active child Job:     Progressing=True, Available=True JobsActive
//	else:                          Available=True AllJobsCompleted, Progressing=False NoJobsActive
//
// A type a branch does not name keeps what it had, as in the book.

const (
	available   = "Available"
	progressing = "Progressing"
	degraded    = "Degraded"
)

// observed is what the table reads from the child Jobs and the spec.
type observed struct {
	suspended      bool
	failed, active int
}

type conditionSetter struct {
	r          *plugin.Request[CronJob]
	conditions *[]metav1.Condition
	generation int64
}

func (s conditionSetter) set(conditionType string, status metav1.ConditionStatus, reason, message string) {
	c := metav1.Condition{Type: conditionType, Status: status, Reason: reason, Message: message, ObservedGeneration: s.generation}
	// A stored condition with no transition time gets one, as if new.
	if old := meta.FindStatusCondition(*s.conditions, conditionType); old != nil && old.LastTransitionTime.IsZero() {
		old.Status = ""
	}
	s.r.SetCondition(s.conditions, c)
}

// starting is the book's first step.
func (s conditionSetter) starting() {
	for _, t := range []string{available, progressing, degraded} {
		if meta.FindStatusCondition(*s.conditions, t) != nil {
			return
		}
	}
	s.set(progressing, metav1.ConditionUnknown, "Reconciling", "Starting reconciliation")
}

func setFromChildren(r *plugin.Request[CronJob], status *CronJobStatus, o observed, generation int64) {
	s := conditionSetter{r, &status.Conditions, generation}
	s.starting()
	switch {
	case o.suspended:
		s.set(available, metav1.ConditionFalse, "Suspended", "CronJob is suspended")
	case o.failed > 0:
		message := fmt.Sprintf("%d job(s) have failed", o.failed)
		s.set(degraded, metav1.ConditionTrue, "JobsFailed", message)
		s.set(available, metav1.ConditionFalse, "JobsFailed", message)
	case o.active > 0:
		message := fmt.Sprintf("%d job(s) are currently active", o.active)
		s.set(progressing, metav1.ConditionTrue, "JobsActive", message)
		s.set(available, metav1.ConditionTrue, "JobsActive", message)
	default:
		s.set(available, metav1.ConditionTrue, "AllJobsCompleted", "All jobs have completed")
		s.set(progressing, metav1.ConditionFalse, "NoJobsActive", "No jobs are currently active")
	}
}

func setChildrenUnreadable(r *plugin.Request[CronJob], status *CronJobStatus, err error, generation int64) {
	s := conditionSetter{r, &status.Conditions, generation}
	s.starting()
	s.set(degraded, metav1.ConditionTrue, "ReconciliationError", "cannot read the child Jobs: "+err.Error())
}
