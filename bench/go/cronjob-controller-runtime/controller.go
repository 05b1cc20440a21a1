// The CronJob reconciler: the kubebuilder tutorial's controller logic on
// controller-runtime. Each reconcile reads one CronJob and its Jobs from the
// informer cache, writes the CronJob's status (running Jobs, last scheduled
// time), deletes finished Jobs beyond the history limits, and creates the
// Job of the most recent missed run unless it is suspended, too late
// (startingDeadlineSeconds) or blocked by the concurrency policy; it then
// asks to be called again at the next scheduled time.

package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/robfig/cron/v3"
	kbatch "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ref "k8s.io/client-go/tools/reference"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// scheduledTimeAnnotation holds a Job's nominal start time (RFC 3339); the
// host's plugin writes the same annotation.
const scheduledTimeAnnotation = "batch.tutorial.kubebuilder.io/scheduled-at"

// jobOwnerKey indexes Jobs by the name of the CronJob that controls them.
const jobOwnerKey = ".metadata.controller"

// tooManyMissed bounds the missed start times counted before giving up
// (a wrong clock could otherwise make the loop run for decades of starts).
const tooManyMissed = 100

// CronJobReconciler reconciles CronJobs.
type CronJobReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	Now    func() time.Time
}

func isJobFinished(job *kbatch.Job) (bool, kbatch.JobConditionType) {
	for _, c := range job.Status.Conditions {
		if (c.Type == kbatch.JobComplete || c.Type == kbatch.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

func scheduledTimeForJob(job *kbatch.Job) (*time.Time, error) {
	raw := job.Annotations[scheduledTimeAnnotation]
	if raw == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// Reconcile brings one CronJob's Jobs and status up to date.
func (r *CronJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var cronJob CronJob
	if err := r.Get(ctx, req.NamespacedName, &cronJob); err != nil {
		// Not found: deleted since it was queued; nothing to do.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var childJobs kbatch.JobList
	if err := r.List(ctx, &childJobs, client.InNamespace(req.Namespace), client.MatchingFields{jobOwnerKey: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list child Jobs: %w", err)
	}

	var active, successful, failed []*kbatch.Job
	var mostRecent *time.Time
	for i := range childJobs.Items {
		job := &childJobs.Items[i]
		_, finished := isJobFinished(job)
		switch finished {
		case "":
			active = append(active, job)
		case kbatch.JobFailed:
			failed = append(failed, job)
		case kbatch.JobComplete:
			successful = append(successful, job)
		}
		// The last run is read back from the Jobs themselves.
		scheduled, err := scheduledTimeForJob(job)
		if err != nil {
			logger.Error(err, "unparseable scheduled time", "job", job.Name)
			continue
		}
		if scheduled != nil && (mostRecent == nil || mostRecent.Before(*scheduled)) {
			mostRecent = scheduled
		}
	}
	if mostRecent != nil {
		cronJob.Status.LastScheduleTime = &metav1.Time{Time: *mostRecent}
	} else {
		cronJob.Status.LastScheduleTime = nil
	}
	cronJob.Status.Active = nil
	for _, job := range active {
		jobRef, err := ref.GetReference(r.Scheme, job)
		if err != nil {
			logger.Error(err, "cannot reference active Job", "job", job.Name)
			continue
		}
		cronJob.Status.Active = append(cronJob.Status.Active, *jobRef)
	}
	if err := r.Status().Update(ctx, &cronJob); err != nil {
		return ctrl.Result{}, fmt.Errorf("update CronJob status: %w", err)
	}

	r.pruneHistory(ctx, failed, cronJob.Spec.FailedJobsHistoryLimit)
	r.pruneHistory(ctx, successful, cronJob.Spec.SuccessfulJobsHistoryLimit)

	if cronJob.Spec.Suspend != nil && *cronJob.Spec.Suspend {
		return ctrl.Result{}, nil
	}
	now := r.Now()
	missedRun, nextRun, err := nextSchedule(&cronJob, now)
	if err != nil {
		// A bad schedule is fixed by an edit, which queues the CronJob again.
		logger.Error(err, "cannot compute the schedule")
		return ctrl.Result{}, nil
	}
	scheduled := ctrl.Result{RequeueAfter: nextRun.Sub(now)}
	if missedRun.IsZero() {
		return scheduled, nil
	}
	if d := cronJob.Spec.StartingDeadlineSeconds; d != nil && missedRun.Add(time.Duration(*d)*time.Second).Before(now) {
		return scheduled, nil
	}
	if cronJob.Spec.ConcurrencyPolicy == ForbidConcurrent && len(active) > 0 {
		return scheduled, nil
	}
	if cronJob.Spec.ConcurrencyPolicy == ReplaceConcurrent {
		for _, job := range active {
			if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete active Job %s: %w", job.Name, err)
			}
		}
	}
	job, err := r.jobFor(&cronJob, missedRun)
	if err != nil {
		// Only a template change can fix it, and that queues the CronJob again.
		logger.Error(err, "cannot build the Job from the template")
		return scheduled, nil
	}
	if err := r.Create(ctx, job); err != nil {
		return ctrl.Result{}, fmt.Errorf("create Job %s: %w", job.Name, err)
	}
	// The new Job's event queues the CronJob again, which records it in status.
	return scheduled, nil
}

// pruneHistory deletes the oldest finished Jobs beyond limit, best effort:
// a failed delete is retried on a later reconcile, not by an error now.
func (r *CronJobReconciler) pruneHistory(ctx context.Context, jobs []*kbatch.Job, limit *int32) {
	if limit == nil {
		return
	}
	sort.Slice(jobs, func(i, j int) bool {
		if jobs[i].Status.StartTime == nil {
			return jobs[j].Status.StartTime != nil
		}
		return jobs[i].Status.StartTime.Before(jobs[j].Status.StartTime)
	})
	for i, job := range jobs {
		if int32(i) >= int32(len(jobs))-*limit {
			break
		}
		if err := r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			log.FromContext(ctx).Error(err, "cannot delete old finished Job", "job", job.Name)
		}
	}
}

// nextSchedule returns the most recent start time missed up to now (zero if
// none) and the next one. It counts from the last scheduled run (else the
// CronJob's creation), but never from before now - startingDeadlineSeconds.
func nextSchedule(cronJob *CronJob, now time.Time) (lastMissed time.Time, next time.Time, err error) {
	sched, err := cron.ParseStandard(cronJob.Spec.Schedule)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("unparseable schedule %q: %w", cronJob.Spec.Schedule, err)
	}
	earliest := cronJob.CreationTimestamp.Time
	if cronJob.Status.LastScheduleTime != nil {
		earliest = cronJob.Status.LastScheduleTime.Time
	}
	if d := cronJob.Spec.StartingDeadlineSeconds; d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	if earliest.After(now) {
		return time.Time{}, sched.Next(now), nil
	}
	starts := 0
	for t := sched.Next(earliest); !t.After(now); t = sched.Next(t) {
		lastMissed = t
		starts++
		if starts > tooManyMissed {
			return time.Time{}, time.Time{}, fmt.Errorf("more than %d missed start times: set or lower startingDeadlineSeconds, or check clock skew", tooManyMissed)
		}
	}
	return lastMissed, sched.Next(now), nil
}

// jobFor builds the Job of the run at scheduledTime; its name is fixed by
// that time, so a run is never created twice.
func (r *CronJobReconciler) jobFor(cronJob *CronJob, scheduledTime time.Time) (*kbatch.Job, error) {
	job := &kbatch.Job{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{},
			Annotations: map[string]string{},
			Name:        fmt.Sprintf("%s-%d", cronJob.Name, scheduledTime.Unix()),
			Namespace:   cronJob.Namespace,
		},
		Spec: *cronJob.Spec.JobTemplate.Spec.DeepCopy(),
	}
	for k, v := range cronJob.Spec.JobTemplate.Annotations {
		job.Annotations[k] = v
	}
	job.Annotations[scheduledTimeAnnotation] = scheduledTime.Format(time.RFC3339)
	for k, v := range cronJob.Spec.JobTemplate.Labels {
		job.Labels[k] = v
	}
	if err := ctrl.SetControllerReference(cronJob, job, r.Scheme); err != nil {
		return nil, err
	}
	return job, nil
}

// SetupWithManager indexes Jobs by controlling CronJob and watches both kinds.
func (r *CronJobReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	apiVersion := GroupVersion.String()
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &kbatch.Job{}, jobOwnerKey, func(obj client.Object) []string {
		owner := metav1.GetControllerOf(obj.(*kbatch.Job))
		if owner == nil || owner.APIVersion != apiVersion || owner.Kind != "CronJob" {
			return nil
		}
		return []string{owner.Name}
	})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&CronJob{}).
		Owns(&kbatch.Job{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
