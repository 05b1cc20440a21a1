// The CronJob API of group batch.tutorial.kubebuilder.io/v1, the same
// group, version and kind the host's cronjob plugin serves, so both
// controllers reconcile the same objects under the same CRD.

package main

import (
	kbatch "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the CronJob's API group and version.
var GroupVersion = schema.GroupVersion{Group: "batch.tutorial.kubebuilder.io", Version: "v1"}

// ConcurrencyPolicy says how concurrent runs of one CronJob are treated.
type ConcurrencyPolicy string

const (
	AllowConcurrent   ConcurrencyPolicy = "Allow"
	ForbidConcurrent  ConcurrencyPolicy = "Forbid"
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// CronJobSpec is the desired state: a schedule and the Job to run on it.
type CronJobSpec struct {
	Schedule                   string                 `json:"schedule"`
	StartingDeadlineSeconds    *int64                 `json:"startingDeadlineSeconds,omitempty"`
	ConcurrencyPolicy          ConcurrencyPolicy      `json:"concurrencyPolicy,omitempty"`
	Suspend                    *bool                  `json:"suspend,omitempty"`
	JobTemplate                kbatch.JobTemplateSpec `json:"jobTemplate"`
	SuccessfulJobsHistoryLimit *int32                 `json:"successfulJobsHistoryLimit,omitempty"`
	FailedJobsHistoryLimit     *int32                 `json:"failedJobsHistoryLimit,omitempty"`
}

// CronJobStatus is the observed state: the running Jobs and the last run.
type CronJobStatus struct {
	Active           []corev1.ObjectReference `json:"active,omitempty"`
	LastScheduleTime *metav1.Time             `json:"lastScheduleTime,omitempty"`
}

// CronJob is one object of the API.
type CronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CronJobSpec   `json:"spec,omitempty"`
	Status            CronJobStatus `json:"status,omitempty"`
}

// CronJobList is a list of CronJobs.
type CronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CronJob `json:"items"`
}

// addToScheme registers both kinds, as controller-gen's generated code does.
func addToScheme(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &CronJob{}, &CronJobList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// Deep copies, written out as controller-gen would generate them (the
// informer cache hands out copies, so every pointer and slice is copied).

func (in *CronJobSpec) DeepCopyInto(out *CronJobSpec) {
	*out = *in
	if in.StartingDeadlineSeconds != nil {
		out.StartingDeadlineSeconds = new(int64)
		*out.StartingDeadlineSeconds = *in.StartingDeadlineSeconds
	}
	if in.Suspend != nil {
		out.Suspend = new(bool)
		*out.Suspend = *in.Suspend
	}
	in.JobTemplate.DeepCopyInto(&out.JobTemplate)
	if in.SuccessfulJobsHistoryLimit != nil {
		out.SuccessfulJobsHistoryLimit = new(int32)
		*out.SuccessfulJobsHistoryLimit = *in.SuccessfulJobsHistoryLimit
	}
	if in.FailedJobsHistoryLimit != nil {
		out.FailedJobsHistoryLimit = new(int32)
		*out.FailedJobsHistoryLimit = *in.FailedJobsHistoryLimit
	}
}

func (in *CronJobStatus) DeepCopyInto(out *CronJobStatus) {
	*out = *in
	if in.Active != nil {
		out.Active = make([]corev1.ObjectReference, len(in.Active))
		copy(out.Active, in.Active)
	}
	if in.LastScheduleTime != nil {
		out.LastScheduleTime = in.LastScheduleTime.DeepCopy()
	}
}

func (in *CronJob) DeepCopyInto(out *CronJob) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

func (in *CronJob) DeepCopy() *CronJob {
	if in == nil {
		return nil
	}
	out := new(CronJob)
	in.DeepCopyInto(out)
	return out
}

func (in *CronJob) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *CronJobList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(CronJobList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]CronJob, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
