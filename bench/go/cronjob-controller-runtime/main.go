// cronjob-controller-runtime: the kubebuilder tutorial's CronJob controller
// on controller-runtime, as a user would run it instead of the operator
// host, for the benchmark `bench head-to-head`. Webhooks are off; the
// defaults are controller-runtime's (one worker; the client's rate limiter
// off, QPS -1, as its GetConfig sets it); --workers, --qps and --burst make
// the tuned row. The API server comes from KUBECONFIG.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	workers := flag.Int("workers", 1, "CronJobs reconciled at once (controller-runtime's default: 1)")
	qps := flag.Float64("qps", 0, "client-side rate limit, requests per second (0: controller-runtime's default, limiter off; <0: off)")
	burst := flag.Int("burst", 0, "client-side burst with --qps > 0")
	probe := flag.String("health-probe-bind-address", "127.0.0.1:8081", "address of /healthz and /readyz (ready once the caches are synced)")
	metrics := flag.String("metrics-bind-address", "0", "address of /metrics; 0 disables")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(*workers, *qps, *burst, *probe, *metrics); err != nil {
		fmt.Fprintf(os.Stderr, "cronjob-controller-runtime: %v\n", err)
		os.Exit(1)
	}
}

func run(workers int, qps float64, burst int, probe, metrics string) error {
	if workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", workers)
	}
	if qps > 0 && burst < 1 {
		return errors.New("--qps > 0 needs --burst >= 1")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := addToScheme(scheme); err != nil {
		return err
	}
	config, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if qps != 0 {
		config.QPS, config.Burst = float32(qps), burst
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metrics},
		HealthProbeBindAddress: probe,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	reconciler := &CronJobReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Now: time.Now}
	if err := reconciler.SetupWithManager(mgr, workers); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", func(*http.Request) error { return nil }); err != nil {
		return err
	}
	// Ready once the informers of both kinds have listed everything.
	synced := func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches not synced")
		}
		return nil
	}
	if err := mgr.AddReadyzCheck("caches", synced); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
