//! The Job and CronJob controllers of the simulated cluster.
//!
//! A Job keeps up to `parallelism` pods until `completions` of them have run to the end: a pod
//! runs its Job's run time once bound, then succeeds and is deleted. A pod deleted or evicted
//! before that does not count, and the Job makes another (as a Job with a backoff limit high
//! enough to retry evictions does). A CronJob makes a Job each time its schedule fires, in UTC
//! on the simulated clock (which starts at the Unix epoch), honouring `suspend` and
//! `concurrencyPolicy`.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_adapters::manifest::{CronJob, Job};
use nodewright_core::disruption::schedule::CronSchedule;
use nodewright_core::model::pod::PodKey;

mod controller;

/// `(namespace, name)`.
pub type ObjectKey = (String, String);

/// A Job and how far it has come.
#[derive(Debug, Clone)]
pub struct JobRun {
    pub job: Job,
    pub succeeded: u32,
    /// Its pods that are running or waiting to.
    pub active: BTreeSet<PodKey>,
}

impl JobRun {
    pub fn complete(&self) -> bool {
        self.succeeded >= self.job.completions
    }

    /// Whether it has fewer pods running or waiting than its parallelism and its completions
    /// left allow: the Job controller makes another.
    pub fn wants_a_pod(&self) -> bool {
        let wanted = self.job.completions.saturating_sub(self.succeeded);
        let active = self.active.len() as u32;
        active < self.job.parallelism && active < wanted
    }
}

/// A CronJob, its parsed schedule and the Jobs it made.
#[derive(Debug, Clone)]
pub struct CronJobRun {
    pub cronjob: CronJob,
    schedule: CronSchedule,
    /// The Jobs it made, oldest first.
    pub jobs: Vec<ObjectKey>,
}

/// The Jobs and CronJobs of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Jobs {
    pub jobs: BTreeMap<ObjectKey, JobRun>,
    /// The Job of each active pod.
    job_of: BTreeMap<PodKey, ObjectKey>,
    /// The Jobs not complete yet: the only ones that may want another pod (a long run keeps
    /// thousands of complete ones).
    unfinished: BTreeSet<ObjectKey>,
    pub cronjobs: BTreeMap<ObjectKey, CronJobRun>,
    /// Completions the world has yet to schedule: (time, pod).
    pub completions_to_schedule: Vec<(u64, PodKey)>,
}

impl Jobs {
    /// A pod was bound: a Job's pod succeeds its run time later.
    pub fn note_bound(&mut self, pod: &PodKey, now_ms: u64) {
        if let Some(key) = self.job_of.get(pod)
            && let Some(run) = self.jobs.get(key)
        {
            self.completions_to_schedule
                .push((now_ms.saturating_add(run.job.run_ms), pod.clone()));
        }
    }

    /// The Jobs that want another pod, in name order (of the unfinished ones: the others never
    /// do).
    pub fn wanting_pods(&self) -> Vec<ObjectKey> {
        self.unfinished
            .iter()
            .filter(|key| self.jobs.get(*key).is_some_and(JobRun::wants_a_pod))
            .cloned()
            .collect()
    }

    /// Keeps [`Jobs::unfinished`] in step with the Job at `key`.
    fn note_progress(&mut self, key: &ObjectKey) {
        match self.jobs.get(key) {
            Some(run) if !run.complete() => {
                self.unfinished.insert(key.clone());
            }
            _ => {
                self.unfinished.remove(key);
            }
        }
    }

    /// A pod is going (deleted, evicted, its node gone): it is no longer its Job's.
    pub fn note_gone(&mut self, pod: &PodKey) {
        if let Some(key) = self.job_of.remove(pod)
            && let Some(run) = self.jobs.get_mut(&key)
        {
            run.active.remove(pod);
        }
    }
}
