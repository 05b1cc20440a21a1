// Package book is the kubebuilder book's CronJob controller test, extended to
// the history limits, run against a cluster where the CronJob controller
// already runs (the operator host with cronjob.wasm) instead of against a
// manager started by the test.
//
// It reads only KUBECONFIG (the cluster, through envtest's
// UseExistingCluster) and, optionally, BOOK_TEST_NAMESPACE (default: a fresh
// namespace, deleted at the end). It never waits for a Job controller to run
// a Job: it writes every Job's status itself, as the book's test does, so it
// passes on a bare API server with no controllers but the CronJob one, on
// the host's simulated cluster, and on a real control plane.
package book

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// How long any one expectation may take.
	timeout = 60 * time.Second
	poll    = 250 * time.Millisecond
	// Keeps a Job the host's simulated Job runner would run active for the
	// whole test; an annotation any other cluster ignores.
	simulatedDurationAnnotation = "sim.operator-host.dev/duration"
)

func TestCronJobControllerKeepsStatusConditionsAndHistoryLimits(t *testing.T) {
	ctx := context.Background()
	env := &envtest.Environment{UseExistingCluster: ptr.To(true)}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest with UseExistingCluster (KUBECONFIG=%q): %v", os.Getenv("KUBECONFIG"), err)
	}
	defer func() { _ = env.Stop() }()

	s := runtime.NewScheme()
	must(t, clientgoscheme.AddToScheme(s))
	must(t, schemeBuilder.AddToScheme(s))
	k8sClient, err := client.New(cfg, client.Options{Scheme: s})
	must(t, err)

	namespace := namespaceFor(ctx, t, k8sClient)
	key := types.NamespacedName{Name: "test-cronjob", Namespace: namespace}

	t.Log("creating the CronJob (once the API serves the kind)")
	cronJob := &CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: namespace},
		Spec: CronJobSpec{
			// Once a year, at a time no run of this test reaches: the only
			// Jobs are the ones the test creates. (The book uses
			// "1 * * * *", which can start a run during the test.)
			Schedule:    "0 0 1 1 *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: jobSpec()},
		},
	}
	eventually(t, "the CronJob is created", func() error { return k8sClient.Create(ctx, cronJob) })
	defer func() { _ = k8sClient.Delete(ctx, cronJob) }()

	t.Log("status conditions are initialized")
	eventually(t, "Available=True/AllJobsCompleted and Progressing=False/NoJobsActive", func() error {
		if err := k8sClient.Get(ctx, key, cronJob); err != nil {
			return err
		}
		return allOf(
			hasCondition(cronJob, "Available", metav1.ConditionTrue, "AllJobsCompleted"),
			hasCondition(cronJob, "Progressing", metav1.ConditionFalse, "NoJobsActive"),
			hasCondition(cronJob, "Valid", metav1.ConditionTrue, "Valid"),
		)
	})

	t.Log("no Job is active")
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(poll) {
		must(t, k8sClient.Get(ctx, key, cronJob))
		if len(cronJob.Status.Active) != 0 {
			t.Fatalf("status.active = %v, want none", cronJob.Status.Active)
		}
	}

	t.Log("a Job owned by the CronJob, whose status says it runs two Pods")
	testJob := ownedJob(cronJob, "test-job")
	testJob.Annotations = map[string]string{simulatedDurationAnnotation: "1h"}
	must(t, k8sClient.Create(ctx, testJob))
	// At once, with the resourceVersion the create returned, as the book
	// does: no controller of the cluster may have written the Job before.
	testJob.Status.Active = 2
	if err := k8sClient.Status().Update(ctx, testJob); err != nil {
		t.Fatalf("status update right after creating the Job: %v", err)
	}

	eventually(t, "status.active names test-job and Available=True/JobsActive", func() error {
		if err := k8sClient.Get(ctx, key, cronJob); err != nil {
			return err
		}
		if len(cronJob.Status.Active) != 1 || cronJob.Status.Active[0].Name != "test-job" {
			return fmt.Errorf("status.active = %v, want [test-job]", cronJob.Status.Active)
		}
		return allOf(
			hasCondition(cronJob, "Available", metav1.ConditionTrue, "JobsActive"),
			hasCondition(cronJob, "Progressing", metav1.ConditionTrue, "JobsActive"),
		)
	})
	available := meta.FindStatusCondition(cronJob.Status.Conditions, "Available")
	if n := countConditions(cronJob, "Available"); n != 1 {
		t.Fatalf("%d Available conditions, want one", n)
	}
	if available.ObservedGeneration != cronJob.Generation {
		t.Fatalf("Available.observedGeneration = %d, want %d", available.ObservedGeneration, cronJob.Generation)
	}

	t.Log("history limits of one successful and one failed Job")
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, key, cronJob); err != nil {
			return err
		}
		cronJob.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
		cronJob.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
		return k8sClient.Update(ctx, cronJob)
	}))

	t.Log("finished Jobs, oldest first")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	finished := []struct {
		name      string
		succeeded bool
	}{
		{"succeeded-1", true}, {"failed-1", false}, {"succeeded-2", true}, {"failed-2", false}, {"succeeded-3", true},
	}
	for i, f := range finished {
		job := ownedJob(cronJob, f.name)
		must(t, k8sClient.Create(ctx, job))
		must(t, finish(ctx, k8sClient, job, base.Add(time.Duration(i)*time.Minute), f.succeeded))
	}

	t.Log("the oldest finished Jobs are deleted")
	eventually(t, "only succeeded-3, failed-2 and test-job are left", func() error {
		for _, name := range []string{"succeeded-1", "succeeded-2", "failed-1"} {
			if present, err := jobPresent(ctx, k8sClient, namespace, name); err != nil || present {
				return fmt.Errorf("%s is still there (%v)", name, err)
			}
		}
		for _, name := range []string{"succeeded-3", "failed-2", "test-job"} {
			if present, err := jobPresent(ctx, k8sClient, namespace, name); err != nil || !present {
				return fmt.Errorf("%s is gone (%v)", name, err)
			}
		}
		return nil
	})

	t.Log("a failed Job degrades the CronJob; test-job is still active")
	eventually(t, "Degraded=True/JobsFailed and Available=False/JobsFailed", func() error {
		if err := k8sClient.Get(ctx, key, cronJob); err != nil {
			return err
		}
		if len(cronJob.Status.Active) != 1 || cronJob.Status.Active[0].Name != "test-job" {
			return fmt.Errorf("status.active = %v, want [test-job]", cronJob.Status.Active)
		}
		if err := allOf(
			hasCondition(cronJob, "Degraded", metav1.ConditionTrue, "JobsFailed"),
			hasCondition(cronJob, "Available", metav1.ConditionFalse, "JobsFailed"),
		); err != nil {
			return err
		}
		if got := meta.FindStatusCondition(cronJob.Status.Conditions, "Degraded").Message; got != "1 job(s) have failed" {
			return fmt.Errorf("Degraded message %q, want %q", got, "1 job(s) have failed")
		}
		return nil
	})
}

// namespaceFor is BOOK_TEST_NAMESPACE, or a new namespace deleted when the test ends.
func namespaceFor(ctx context.Context, t *testing.T, c client.Client) string {
	if name := os.Getenv("BOOK_TEST_NAMESPACE"); name != "" {
		return name
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "book-" + strconv.FormatInt(time.Now().UnixNano(), 36)}}
	must(t, c.Create(ctx, ns))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

func jobSpec() batchv1.JobSpec {
	return batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{
				Containers:    []corev1.Container{{Name: "test-container", Image: "test-image"}},
				RestartPolicy: corev1.RestartPolicyOnFailure,
			},
		},
	}
}

// ownedJob is a Job with the CronJob as its controller.
func ownedJob(cronJob *CronJob, name string) *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cronJob.Namespace},
		Spec:       jobSpec(),
	}
	ref := metav1.NewControllerRef(cronJob, groupVersion.WithKind("CronJob"))
	job.SetOwnerReferences([]metav1.OwnerReference{*ref})
	return job
}

// finish writes the status a Job controller writes when the Job completes
// (SuccessCriteriaMet, Complete) or fails (FailureTarget, Failed), which a
// real API server's Job status validation asks for. A startTime that a Job
// controller recorded first is kept: it may not change once set.
func finish(ctx context.Context, c client.Client, job *batchv1.Job, started time.Time, succeeded bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		if job.Status.StartTime == nil {
			job.Status.StartTime = &metav1.Time{Time: started}
		}
		now := metav1.Time{Time: job.Status.StartTime.Add(time.Minute)}
		job.Status.Active = 0
		job.Status.Ready = ptr.To[int32](0)
		job.Status.Terminating = ptr.To[int32](0)
		condition := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
			return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, LastProbeTime: now, LastTransitionTime: now}
		}
		if succeeded {
			job.Status.Succeeded = 1
			job.Status.CompletionTime = &now
			job.Status.Conditions = []batchv1.JobCondition{
				condition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached),
				condition(batchv1.JobComplete, batchv1.JobReasonCompletionsReached),
			}
		} else {
			job.Status.Failed = 1
			job.Status.Conditions = []batchv1.JobCondition{
				condition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded),
				condition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded),
			}
		}
		return c.Status().Update(ctx, job)
	})
}

// jobPresent: false once the Job is gone or its deletion has begun (the
// controller deleted it; a cluster without a garbage collector may keep it
// while finalizers remain).
func jobPresent(ctx context.Context, c client.Client, namespace, name string) (bool, error) {
	var job batchv1.Job
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &job)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return job.DeletionTimestamp == nil, nil
}

func hasCondition(cronJob *CronJob, conditionType string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(cronJob.Status.Conditions, conditionType)
	if c == nil {
		return fmt.Errorf("no %s condition in %+v", conditionType, cronJob.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason {
		return fmt.Errorf("%s=%s/%s, want %s/%s", conditionType, c.Status, c.Reason, status, reason)
	}
	return nil
}

func countConditions(cronJob *CronJob, conditionType string) int {
	n := 0
	for _, c := range cronJob.Status.Conditions {
		if c.Type == conditionType {
			n++
		}
	}
	return n
}

func allOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// eventually retries check every poll until it returns nil, for up to timeout.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s: %v", timeout, what, err)
		}
		time.Sleep(poll)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
