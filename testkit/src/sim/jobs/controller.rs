//! The Job and CronJob controllers at work on the simulated cluster: Jobs make and replace
//! their pods, CronJobs make Jobs when their schedules fire (the records they keep are the
//! parent module's).

use std::collections::BTreeSet;

use nodewright_adapters::manifest::{Concurrency, CronJob, Job};
use nodewright_core::Event;
use nodewright_core::disruption::schedule::CronSchedule;
use nodewright_core::model::pod::PodKey;

use super::{CronJobRun, JobRun, ObjectKey};
use crate::sim::cluster::{PodChange, SimCluster};
use crate::sim::rng::SimRng;

const MINUTE_MS: u64 = 60_000;
/// How far ahead a schedule is searched for its next firing: a schedule that names a date
/// that never comes (`0 0 30 2 *`) fires never.
const CRON_HORIZON_MINUTES: u64 = 4 * 366 * 24 * 60;

impl SimCluster {
    /// Applies a Job: a new one starts its pods; an existing one keeps its progress and takes
    /// the new counts.
    pub fn apply_job(
        &mut self,
        job: Job,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let key = (job.namespace.clone(), job.name.clone());
        match self.jobs.jobs.get_mut(&key) {
            Some(run) => run.job = job,
            None => {
                self.jobs.jobs.insert(
                    key.clone(),
                    JobRun {
                        job,
                        succeeded: 0,
                        active: BTreeSet::new(),
                    },
                );
            }
        }
        self.jobs.note_progress(&key);
        self.reconcile_job(&key, now_ms, rng, out, changes);
    }

    /// Makes pods until the Job has `parallelism` running or waiting, or enough to reach its
    /// completions.
    pub fn reconcile_job(
        &mut self,
        key: &ObjectKey,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        loop {
            let Some(run) = self.jobs.jobs.get(key) else {
                return;
            };
            if !run.wants_a_pod() {
                return;
            }
            let job = &run.job;
            let name = loop {
                let candidate = format!("{}-{}", job.name, rng.name_suffix());
                if !self
                    .pods
                    .contains_key(&PodKey::new(&job.namespace, &candidate))
                {
                    break candidate;
                }
            };
            let pod = job.template.instantiate(&job.namespace, &name, now_ms);
            let claims = job.template.volume_claims.clone();
            let grace_ms =
                (job.template.termination_grace_period_seconds.max(0) as u64).saturating_mul(1000);
            let pod_key = pod.key.clone();
            if let Some(run) = self.jobs.jobs.get_mut(key) {
                run.active.insert(pod_key.clone());
            }
            self.jobs.job_of.insert(pod_key.clone(), key.clone());
            self.grace_ms.insert(pod_key, grace_ms);
            self.create_pod_with_claims(pod, claims, now_ms, out, changes);
        }
    }

    /// A Job's pod ran to its end: it succeeds and is deleted, and the Job moves on.
    pub fn pod_completed(
        &mut self,
        pod: &PodKey,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) {
        let running = self.pods.get(pod).is_some_and(|p| p.node_name.is_some())
            && !self.terminating.contains_key(pod);
        let Some(key) = self.jobs.job_of.get(pod).cloned() else {
            return;
        };
        if !running {
            return;
        }
        if let Some(run) = self.jobs.jobs.get_mut(&key) {
            run.succeeded += 1;
        }
        self.jobs.note_progress(&key);
        self.delete_pod(pod, false, now_ms, out, changes);
        self.reconcile_job(&key, now_ms, rng, out, changes);
    }

    /// Deletes a Job and its pods (each with its grace period).
    pub fn delete_job(
        &mut self,
        key: &ObjectKey,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) -> bool {
        let Some(run) = self.jobs.jobs.remove(key) else {
            return false;
        };
        self.jobs.note_progress(key);
        for pod in run.active {
            self.jobs.job_of.remove(&pod);
            self.terminate_pod(&pod, false, now_ms, out, changes);
        }
        true
    }

    /// Applies a CronJob; the first time its schedule fires after `now_ms` (none: never).
    pub fn apply_cronjob(&mut self, cronjob: CronJob, now_ms: u64) -> Option<u64> {
        // The loader checked the schedule; one that does not parse never fires.
        let schedule = CronSchedule::parse(&cronjob.schedule).ok()?;
        let key = (cronjob.namespace.clone(), cronjob.name.clone());
        let jobs = self
            .jobs
            .cronjobs
            .remove(&key)
            .map(|old| old.jobs)
            .unwrap_or_default();
        let next = next_firing(&schedule, now_ms);
        self.jobs.cronjobs.insert(
            key,
            CronJobRun {
                cronjob,
                schedule,
                jobs,
            },
        );
        next
    }

    /// The CronJob's schedule fires at `now_ms` (a whole minute): it makes a Job as its
    /// `suspend` and `concurrencyPolicy` allow. The next firing, if the CronJob still exists.
    pub fn fire_cronjob(
        &mut self,
        key: &ObjectKey,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) -> Option<u64> {
        let cron = self.jobs.cronjobs.get(key)?.clone();
        let next = next_firing(&cron.schedule, now_ms);
        let running: Vec<ObjectKey> = cron
            .jobs
            .iter()
            .filter(|j| self.jobs.jobs.get(*j).is_some_and(|r| !r.complete()))
            .cloned()
            .collect();
        let start = !cron.cronjob.suspend
            && match cron.cronjob.concurrency {
                Concurrency::Allow => true,
                Concurrency::Forbid => running.is_empty(),
                Concurrency::Replace => {
                    for job in &running {
                        self.delete_job(job, now_ms, out, changes);
                    }
                    true
                }
            };
        if start {
            // Named by the minute it was scheduled for, as the CronJob controller names Jobs.
            let mut job = cron.cronjob.job.clone();
            job.name = format!("{}-{}", cron.cronjob.name, now_ms / MINUTE_MS);
            let job_key = (job.namespace.clone(), job.name.clone());
            if let Some(c) = self.jobs.cronjobs.get_mut(key) {
                c.jobs.push(job_key);
            }
            self.apply_job(job, now_ms, rng, out, changes);
        }
        next
    }

    /// Deletes a CronJob and the Jobs it made.
    pub fn delete_cronjob(
        &mut self,
        key: &ObjectKey,
        now_ms: u64,
        out: &mut Vec<Event>,
        changes: &mut Vec<PodChange>,
    ) -> bool {
        let Some(cron) = self.jobs.cronjobs.remove(key) else {
            return false;
        };
        for job in &cron.jobs {
            self.delete_job(job, now_ms, out, changes);
        }
        true
    }
}

/// The first whole minute strictly after `now_ms` at which `schedule` fires.
fn next_firing(schedule: &CronSchedule, now_ms: u64) -> Option<u64> {
    let first = now_ms / MINUTE_MS + 1;
    (first..first + CRON_HORIZON_MINUTES)
        .find(|&m| schedule.fires_at_minute(m as i64))
        .map(|m| m * MINUTE_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_firing_is_the_next_matching_minute() {
        let every_15 = CronSchedule::parse("*/15 * * * *").expect("parses");
        assert_eq!(next_firing(&every_15, 0), Some(15 * MINUTE_MS));
        assert_eq!(next_firing(&every_15, 15 * MINUTE_MS), Some(30 * MINUTE_MS));
        assert_eq!(
            next_firing(&every_15, 16 * MINUTE_MS - 1),
            Some(30 * MINUTE_MS)
        );
        let never = CronSchedule::parse("0 0 30 2 *").expect("parses");
        assert_eq!(next_firing(&never, 0), None);
    }
}
