//! The fenced leader on a real API server: while the API server is paused (SIGSTOP, as a
//! machine that hangs), the leader stops acting within its renew deadline, and the standby
//! takes over only after that — at no moment do both hold a fence that lets them act.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nodewright_controller::leadership::{self, LeaderElection};
use nodewright_controller::metrics::Metrics;
use nodewright_controlplane::ControlPlane;

fn election() -> LeaderElection {
    LeaderElection {
        name: "nodewright-leader-election".into(),
        namespace: "default".into(),
        // Renew deadline 2 s, retry period 400 ms.
        lease_duration: Duration::from_secs(3),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_server_stops_acting_before_a_standby_takes_over() {
    let control_plane = ControlPlane::start()
        .await
        .expect("the control plane starts");
    let client = control_plane.client();
    let metrics = Arc::new(Metrics::new());
    let election = election();

    let mut a = leadership::acquire(client.clone(), &election, "a", Arc::clone(&metrics))
        .await
        .expect("the first replica leads");
    let a_fence = a.fence();
    assert!(a_fence.holds());

    // The standby waits.
    let standby = {
        let (client, election, metrics) = (client.clone(), election.clone(), Arc::clone(&metrics));
        tokio::spawn(async move {
            let b = leadership::acquire(client, &election, "b", metrics)
                .await
                .expect("the standby leads in the end");
            (b, Instant::now())
        })
    };
    // The leader renews while the standby waits: its fence holds past several deadlines.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(a_fence.holds(), "the leader renews its lease");
    assert!(
        !standby.is_finished(),
        "the standby does not take a renewed lease"
    );

    // When the leader's fence stops holding, watched every 10 ms.
    let lapsed_at = {
        let fence = a.fence();
        tokio::spawn(async move {
            while fence.holds() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Instant::now()
        })
    };
    let paused_at = Instant::now();
    control_plane
        .pause("kube-apiserver")
        .expect("the API server pauses");
    tokio::time::sleep(Duration::from_secs(6)).await;
    control_plane
        .resume("kube-apiserver")
        .expect("the API server resumes");

    let lapsed_at = lapsed_at.await.expect("the fence watcher ends");
    let stopped_within = lapsed_at - paused_at;
    assert!(
        stopped_within <= election.renew_deadline() + Duration::from_millis(500),
        "the leader stopped acting {stopped_within:?} after it was cut off (renew deadline {:?})",
        election.renew_deadline()
    );
    tokio::time::timeout(Duration::from_secs(5), a.lost())
        .await
        .expect("the leader hears its lease is lost");

    let (b, b_took_at) = tokio::time::timeout(Duration::from_secs(30), standby)
        .await
        .expect("the standby takes over once the API server is back")
        .expect("the standby's task ends");
    let b_fence = b.fence();
    assert!(b_fence.holds());
    assert!(b_fence.term() > a_fence.term(), "a new term");
    assert!(
        lapsed_at < b_took_at,
        "the leader's fence lapsed {:?} after the standby took over",
        lapsed_at - b_took_at
    );
    assert!(!a_fence.holds(), "a lapsed fence never holds again");
    let gap = b_took_at - lapsed_at;
    println!(
        "fence lapsed {stopped_within:?} after the cut; the standby took over {gap:?} after that"
    );
    assert!(
        metrics
            .encode()
            .contains("nodewright_lease_renewals_failed_total"),
        "renewals that failed are counted"
    );
    b.release().await;
    a.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_at_once() {
    let control_plane = ControlPlane::start()
        .await
        .expect("the control plane starts");
    let client = control_plane.client();
    let metrics = Arc::new(Metrics::new());
    let election = LeaderElection {
        lease_duration: Duration::from_secs(15),
        ..election()
    };
    let a = leadership::acquire(client.clone(), &election, "a", Arc::clone(&metrics))
        .await
        .expect("the first replica leads");
    let a_fence = a.fence();
    let standby = {
        let (client, election, metrics) = (client.clone(), election.clone(), Arc::clone(&metrics));
        tokio::spawn(async move { leadership::acquire(client, &election, "b", metrics).await })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!standby.is_finished());
    let released_at = Instant::now();
    a.release().await;
    assert!(!a_fence.holds(), "a released term acts no more");
    let b = tokio::time::timeout(Duration::from_secs(10), standby)
        .await
        .expect("the standby takes a released lease well before it would run out")
        .expect("the standby's task ends")
        .expect("the standby leads");
    assert!(
        released_at.elapsed() < Duration::from_secs(10),
        "taken {:?} after the release, the lease being 15 s",
        released_at.elapsed()
    );
    assert!(b.fence().holds());
    b.release().await;
}
