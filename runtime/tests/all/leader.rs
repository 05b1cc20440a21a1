//! Leader election: the Lease protocol against the embedded API server with
//! in-process candidates: one wins and the other stands by, a release hands
//! over at once, an expired lease is taken, a renewal that cannot succeed
//! loses leadership. Two real `host run --leader-elect` processes are
//! host/tests/all/leader.rs.

use crate::common;

use std::time::{Duration, Instant};

use apiserver::ApiServer;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use operator_runtime::leader::{Config, LeaderElector};

const WAIT: Duration = Duration::from_secs(90);
const LEASE: &str = "operator-host";

fn config(identity: &str, lease: Duration) -> Config {
    Config {
        namespace: "default".into(),
        name: LEASE.into(),
        identity: identity.into(),
        lease_duration: lease,
        renew_deadline: lease / 2,
        retry_period: lease / 10,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_candidate_wins_the_other_stands_by_and_a_release_hands_over_at_once() {
    let server = ApiServer::new();
    let client = server.kube_client();
    let mut a = LeaderElector::new(client.clone(), config("a", Duration::from_secs(60))).unwrap();
    let mut b = LeaderElector::new(client.clone(), config("b", Duration::from_secs(60))).unwrap();

    let (won_a, won_b) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
    let (mut leader, mut standby) = match (won_a.unwrap(), won_b.unwrap()) {
        (true, false) => (a, b),
        (false, true) => (b, a),
        other => panic!("exactly one candidate must win a race for a missing lease, got {other:?}"),
    };
    let first = common::lease(&client, LEASE).await.unwrap().spec.unwrap();
    assert_eq!(first.holder_identity.as_deref(), Some(leader.config().identity.as_str()));
    assert_eq!(first.lease_transitions, Some(0));
    assert_eq!(first.lease_duration_seconds, Some(60));
    assert!(!standby.try_acquire_or_renew().await.unwrap(), "a held, unexpired lease is not taken");

    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(leader.try_acquire_or_renew().await.unwrap(), "the holder renews");
    let renewed = common::lease(&client, LEASE).await.unwrap().spec.unwrap();
    assert_eq!(renewed.acquire_time, first.acquire_time, "a renewal keeps acquireTime");
    assert!(renewed.renew_time.as_ref().unwrap().0 > first.renew_time.as_ref().unwrap().0, "a renewal moves renewTime");
    assert_eq!(renewed.lease_transitions, Some(0));

    leader.release().await.unwrap();
    let released = common::lease(&client, LEASE).await.unwrap().spec.unwrap();
    assert_eq!(released.holder_identity.as_deref(), Some(""));
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert!(standby.try_acquire_or_renew().await.unwrap(), "a released lease is free at once");
    assert_eq!(common::lease_holder(&client, LEASE).await, standby.config().identity);
    assert_eq!(common::lease_transitions(&client, LEASE).await, 1);
    assert!(!leader.try_acquire_or_renew().await.unwrap(), "the old leader is now the standby");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_nobody_renews_is_taken_once_it_expired_as_observed_locally() {
    let server = ApiServer::new();
    let client = server.kube_client();
    let lease_duration = Duration::from_secs(1);
    let mut a = LeaderElector::new(client.clone(), config("a", lease_duration)).unwrap();
    let mut b = LeaderElector::new(client.clone(), config("b", lease_duration)).unwrap();
    assert!(a.try_acquire_or_renew().await.unwrap());
    let seen = Instant::now();
    assert!(!b.try_acquire_or_renew().await.unwrap());
    // `a` stops renewing. `b` counts the lease duration from when it saw the
    // record change, so it must not win before that much time has passed.
    let won = loop {
        if b.try_acquire_or_renew().await.unwrap() {
            break seen.elapsed();
        }
        assert!(seen.elapsed() < WAIT, "the expired lease was never taken");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(won >= lease_duration, "taken after {won:?}, before the lease duration passed");
    assert_eq!(common::lease_holder(&client, LEASE).await, "b");
    assert_eq!(common::lease_transitions(&client, LEASE).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_cannot_succeed_loses_leadership_within_the_renew_deadline() {
    let server = ApiServer::new();
    let client = server.kube_client();
    let mut a = LeaderElector::new(client.clone(), config("a", Duration::from_secs(2))).unwrap();
    assert!(a.try_acquire_or_renew().await.unwrap());
    // Someone else overwrites the record (as a leader that saw our lease
    // expire would): our renewals are refused from now on.
    let api = Api::<Lease>::namespaced(client.clone(), "default");
    let mut l = api.get(LEASE).await.unwrap();
    l.spec.as_mut().unwrap().holder_identity = Some("usurper".into());
    api.replace(LEASE, &PostParams::default(), &l).await.unwrap();
    let started = Instant::now();
    let lost = tokio::time::timeout(WAIT, a.renew_until_lost()).await.expect("leadership is lost");
    assert!(matches!(lost, operator_runtime::leader::Error::Lost { .. }), "{lost}");
    assert!(started.elapsed() >= Duration::from_secs(1), "lost after {:?}, before the renew deadline", started.elapsed());
    assert_eq!(common::lease_holder(&client, LEASE).await, "usurper", "losing does not write");
}
