package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"operator-host.dev/sdk-go/plugin"
)

// One level-based reconcile of a CronJob: the book's steps with upstream
// Kubernetes' decisions and Events, as plugins/cronjob (Rust) takes them:
//
//  1. sort the children into active, successful and failed Jobs, and note
//     what changed since the stored status (SawCompletedJob, MissingJob,
//     UnexpectedJob);
//  2. rebuild the status from the children (active references, the last
//     scheduled time from the Jobs' annotations too, so a lost status
//     write is recovered, the last successful time);
//  3. delete finished Jobs beyond the history limits, oldest first;
//  4. stop on an invalid spec, a CronJob being deleted or suspended;
//  5. find the most recent due run and the next one, honouring
//     startingDeadlineSeconds;
//  6. apply the concurrency policy and create the Job, named from its
//     scheduled time;
//  7. requeue for the next run, plus upstream's 100 ms.
//
// Answers come out as: observation Events, deletions, the new Job, the
// status, the requeue.

const nextScheduleDelta = 100 * time.Millisecond

func reconcile(r *plugin.Request[CronJob]) (plugin.Result, error) {
	cj := r.Parent
	list, err := plugin.Of[batchv1.Job](r.Children, jobKind)
	if err != nil {
		// The book's failed List: the stored status, Degraded, nothing else
		// (no requeue: a change to the children arrives through the watch).
		status := cj.stored()
		setChildrenUnreadable(r, &status, fmt.Errorf("a child is not a valid batch/v1 Job: %w", err), cj.Generation)
		return plugin.Result{}, r.SetStatus(status)
	}
	jobs := make([]childJob, len(list))
	for i := range list {
		jobs[i] = newChildJob(&list[i])
	}
	slices.SortFunc(jobs, func(a, b childJob) int { return cmp.Compare(a.Name, b.Name) })

	c := &reconciler{r: r, cj: cj, jobs: jobs, now: r.Now}
	c.observe()
	o := c.observed()
	status := c.rebuildStatus()
	c.deleteOldJobs()
	requeue, ok, err := c.schedule(&status)
	if err != nil {
		return plugin.Result{}, err
	}
	setFromChildren(r, &status, o, cj.Generation)
	if err := r.SetStatus(status); err != nil {
		return plugin.Result{}, err
	}
	if !ok {
		return plugin.Result{}, nil
	}
	return plugin.Result{RequeueAfter: max(requeue.Sub(c.now), 0) + nextScheduleDelta}, nil
}

type reconciler struct {
	r    *plugin.Request[CronJob]
	cj   *CronJob
	jobs []childJob // sorted by name, so every list emitted is in a stable order
	now  time.Time
}

// refersTo: a stored active reference matches a child by UID, or by name when it has none.
func refersTo(ref *corev1.ObjectReference, j *childJob) bool {
	if ref.UID == "" {
		return ref.Name == j.Name
	}
	return ref.UID == j.UID
}

// observe is step 1.
func (c *reconciler) observe() {
	stored := c.cj.stored()
	for i := range c.jobs {
		j := &c.jobs[i]
		wasActive := slices.ContainsFunc(stored.Active, func(ref corev1.ObjectReference) bool { return refersTo(&ref, j) })
		switch {
		case j.finished != "" && wasActive:
			c.r.Event(plugin.Normal, "SawCompletedJob", "Saw completed job: %s, condition: %s", j.Name, j.finished)
		case j.finished == "" && !wasActive && !j.isOurs(c.cj.Name):
			c.r.Event(plugin.Warning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		}
	}
	var missing []string
	for _, ref := range stored.Active {
		if !slices.ContainsFunc(c.jobs, func(j childJob) bool { return refersTo(&ref, &j) }) {
			missing = append(missing, ref.Name)
		}
	}
	slices.Sort(missing)
	for _, name := range missing {
		c.r.Event(plugin.Normal, "MissingJob", "Active job went missing: %s", name)
	}
}

// rebuildStatus is step 2.
func (c *reconciler) rebuildStatus() CronJobStatus {
	stored := c.cj.stored()
	status := CronJobStatus{Conditions: slices.Clone(stored.Conditions)}
	latest := func(stored *metav1.Time, times []*time.Time) *metav1.Time {
		var best *time.Time
		if stored != nil {
			t := stored.UTC()
			best = &t
		}
		for _, t := range times {
			if t != nil && (best == nil || t.After(*best)) {
				best = t
			}
		}
		if best == nil {
			return nil
		}
		return &metav1.Time{Time: *best}
	}
	var scheduled, completed []*time.Time
	for i := range c.jobs {
		j := &c.jobs[i]
		scheduled = append(scheduled, j.scheduledAt)
		if j.finished == batchv1.JobComplete {
			completed = append(completed, j.completionTime)
		}
		if j.isActive() {
			status.Active = append(status.Active, j.reference())
		}
	}
	status.LastScheduleTime = latest(stored.LastScheduleTime, scheduled)
	status.LastSuccessfulTime = latest(stored.LastSuccessfulTime, completed)
	return status
}

// observed is what the book's condition table reads: every child, as the
// book lists them (Jobs being deleted included).
func (c *reconciler) observed() observed {
	o := observed{suspended: deref(c.cj.Spec.Suspend)}
	for i := range c.jobs {
		switch c.jobs[i].finished {
		case batchv1.JobFailed:
			o.failed++
		case "":
			o.active++
		}
	}
	return o
}

// deleteOldJobs is step 3, upstream's cleanupFinishedJobs. Jobs already
// being deleted are neither counted nor deleted again.
func (c *reconciler) deleteOldJobs() {
	for _, h := range []struct {
		limit *int64
		kind  batchv1.JobConditionType
	}{{c.cj.Spec.SuccessfulJobsHistoryLimit, batchv1.JobComplete}, {c.cj.Spec.FailedJobsHistoryLimit, batchv1.JobFailed}} {
		if h.limit == nil || *h.limit < 0 {
			continue
		}
		var done []*childJob
		for i := range c.jobs {
			if j := &c.jobs[i]; j.finished == h.kind && !j.isBeingDeleted() {
				done = append(done, j)
			}
		}
		if int64(len(done)) <= *h.limit {
			continue
		}
		sortByStartTime(done)
		for _, j := range done[:int64(len(done))-*h.limit] {
			c.delete(j)
		}
	}
}

func (c *reconciler) delete(j *childJob) {
	c.r.Delete(j.ref(), plugin.Background)
	c.r.Event(plugin.Normal, "SuccessfulDelete", "Deleted job %s", j.Name)
}

// setValid sets the plugin's Valid condition; it reports whether its
// status, reason or message changed (a Warning is emitted only then).
func (c *reconciler) setValid(status *CronJobStatus, valid bool, reason, message string) bool {
	var before metav1.Condition
	if b := meta.FindStatusCondition(status.Conditions, validCondition); b != nil {
		before = *b
	}
	s := metav1.ConditionFalse
	if valid {
		s = metav1.ConditionTrue
	}
	conditionSetter{c.r, &status.Conditions, c.cj.Generation}.set(validCondition, s, reason, message)
	after := meta.FindStatusCondition(status.Conditions, validCondition)
	return before.Status != after.Status || before.Reason != after.Reason || before.Message != after.Message
}

// schedule is steps 4-7: refuse an invalid spec, else run. It answers
// when to reconcile again, if at all.
func (c *reconciler) schedule(status *CronJobStatus) (time.Time, bool, error) {
	if errs := validateCronJob(c.cj, nil); len(errs) > 0 {
		c.refuse(status, errs)
		return time.Time{}, false, nil
	}
	return c.run(status)
}

func (c *reconciler) run(status *CronJobStatus) (time.Time, bool, error) {
	cj, spec := c.cj, &c.cj.Spec
	text := deref(spec.Schedule)
	// validate has checked both, so neither fails here.
	zone, err := loadZone(deref(spec.TimeZone))
	if err != nil {
		zone = time.UTC
	}
	sched, err := parseSchedule(text, zone)
	if err != nil {
		return time.Time{}, false, nil
	}
	c.setValid(status, true, "Valid", "the spec can be scheduled")
	if cj.DeletionTimestamp != nil || deref(spec.Suspend) {
		return time.Time{}, false, nil
	}

	// Upstream: with no run recorded, count from the CronJob's creation.
	earliest := c.now
	if status.LastScheduleTime != nil {
		earliest = status.LastScheduleTime.UTC()
	} else if !cj.CreationTimestamp.IsZero() {
		earliest = cj.CreationTimestamp.UTC()
	}
	// A deadline too long for time.Duration (past 2^33 s, 272 years,
	// before any CronJob existed; up to int64 max is valid, as upstream)
	// is no limit at all.
	var deadlineStart *time.Time
	if d := spec.StartingDeadlineSeconds; d != nil && *d < 1<<33 {
		t := c.now.Add(-time.Duration(*d) * time.Second)
		deadlineStart = &t
	}
	earliestInDeadline := earliest
	if deadlineStart != nil && deadlineStart.After(earliest) {
		earliestInDeadline = *deadlineStart
	}

	d, err := mostRecent(sched, earliestInDeadline, c.now)
	if err != nil {
		c.r.Event(plugin.Warning, "InvalidSchedule", "invalid schedule: %s : %v", text, err)
		return time.Time{}, false, nil
	}
	next, hasNext := nextRun(sched, earliest, c.now)
	if d.mostRecent == nil {
		c.reportMissedDeadline(sched, earliest, earliestInDeadline)
		return next, hasNext, nil
	}
	scheduled := *d.mostRecent
	if d.missed == missedMany {
		c.r.Event(plugin.Warning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	if deadlineStart != nil && scheduled.Before(*deadlineStart) {
		c.missSchedule(scheduled)
		return next, hasNext, nil
	}
	name := jobName(cj.Name, scheduled)
	if slices.ContainsFunc(c.jobs, func(j childJob) bool { return j.Name == name }) {
		// Already run (its annotation may have been edited away).
		return next, hasNext, nil
	}
	var active []*childJob
	for i := range c.jobs {
		if c.jobs[i].isActive() {
			active = append(active, &c.jobs[i])
		}
	}
	switch cj.policy() {
	case forbidConcurrent:
		if len(active) > 0 {
			c.r.Event(plugin.Normal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return next, hasNext, nil
		}
	case replaceConcurrent:
		for _, j := range active {
			if j.isBeingDeleted() {
				continue
			}
			c.delete(j)
			status.Active = slices.DeleteFunc(status.Active, func(ref corev1.ObjectReference) bool { return ref.Name == j.Name })
		}
	}
	if err := c.r.Create(jobFromTemplate(cj, scheduled, zone)); err != nil {
		return time.Time{}, false, err
	}
	c.r.Event(plugin.Normal, "SuccessfulCreate", "Created job %s", name)
	// lastScheduleTime is left for the next pass, which sees the new Job
	// and records the run from its annotation with its active reference:
	// one status write per run.
	next, hasNext = nextRun(sched, scheduled, c.now)
	return next, hasNext, nil
}

// reportMissedDeadline: a run whose deadline passed unrun is reported
// (upstream's own MissSchedule check can never fire).
func (c *reconciler) reportMissedDeadline(sched cron.Schedule, earliest, earliestInDeadline time.Time) {
	if earliestInDeadline.Equal(earliest) {
		return
	}
	if d, err := mostRecent(sched, earliest, c.now); err == nil && d.mostRecent != nil {
		c.missSchedule(*d.mostRecent)
	}
}

func (c *reconciler) missSchedule(scheduled time.Time) {
	c.r.Event(plugin.Warning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
}

// refuse: an invalid CronJob already stored (admission is not
// guaranteed). Say why, once per distinct problem, and wait for an edit.
func (c *reconciler) refuse(status *CronJobStatus, errs field.ErrorList) {
	spec := &c.cj.Spec
	messages := make([]string, len(errs))
	for i, e := range errs {
		messages[i] = e.Error()
	}
	message := strings.Join(messages, "; ")
	first := errs[0]
	reason, event := "InvalidSpec", message
	switch {
	case first.Field == "spec.timeZone":
		reason, event = "UnknownTimeZone", fmt.Sprintf("invalid timeZone: %q: %s", deref(spec.TimeZone), first.Detail)
	case first.Field == "spec.schedule" && strings.Contains(deref(spec.Schedule), "TZ"):
		reason = "UnsupportedSchedule"
		event = fmt.Sprintf("CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", deref(spec.Schedule))
	case first.Field == "spec.schedule":
		reason, event = "UnparseableSchedule", fmt.Sprintf("unparseable schedule: %q : %s", deref(spec.Schedule), first.Detail)
	}
	if c.setValid(status, false, reason, message) {
		c.r.Event(plugin.Warning, reason, "%s", event)
	}
}
