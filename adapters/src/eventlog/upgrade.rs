//! The header layouts of older format versions, and how each reads as today's.
//!
//! Version 1 (`.nwlog` and store): the core's configuration before the sibling hold. A log it
//! wrote was decided without holding machines, so it reads with `sibling_hold_ms: 0`.
//!
//! Version 2: the configuration before the payback rule counted the work an eviction loses.
//! A log it wrote was decided counting only the restart, so it reads with
//! `count_lost_work: false`.
//!
//! Version 3: the header of today's layout. A log it wrote has every instance listing whole;
//! version 4 adds the listing as its changes (`EventKind::InstancesRelisted`), a record
//! version 3 cannot read.
//!
//! Version 5: `count_lost_work` names whose work counts ([`LostWork`]) instead of being on or
//! off; the bytes of `false` and `true` are those of [`LostWork::Off`] and [`LostWork::Jobs`],
//! so versions 3 and 4 read as they were decided (only a Job's pod's work was counted then),
//! and version 5 is only a new number: a build that knows no [`LostWork::AllButReplicated`]
//! refuses a log that may hold it by its version.
//!
//! Version 6: the configuration gains `separate_when_cheaper`. Versions 3 to 5 laid out the
//! configuration without it ([`ConfigV5`]); a log they wrote was decided putting a pod on a
//! machine planned beside it whatever that cost, so it reads with `separate_when_cheaper:
//! false`.
//!
//! Version 7: the configuration gains `expiration_waits_for_jobs`. Versions 3 to 6 laid it out
//! without it ([`ConfigV5`], [`ConfigV6`]); a log they wrote was decided evicting every pod
//! of an expired machine, so it reads with `expiration_waits_for_jobs: false`.
//!
//! Version 8: the event type gains `NodeClaimsObserved` (what a start observed: every
//! NodeClaim with its instance, adopted) and `NodeDeleting` at its end; the header is version
//! 7's. Only a new number: a build that knows neither refuses a log that may hold them by its
//! version, and logs of versions 1 to 7 replay as recorded.
//!
//! Each replays as recorded.

use nodewright_core::Config;
use nodewright_core::config::{LostWork, MinValuesPolicy, PreferencePolicy};
use serde::Deserialize;

use super::frame;
use super::record::LogHeader;

/// [`LogHeader`] as format version 1 or 2 laid it out, with that version's [`Config`].
#[derive(Deserialize)]
struct OldLogHeader<C> {
    producer: String,
    config: C,
    source: String,
}

/// [`Config`] as format version 1 laid it out.
#[derive(Deserialize)]
struct ConfigV1 {
    cluster_name: String,
    seed: u64,
    batch_idle_ms: u64,
    batch_max_ms: u64,
    launch_timeout_ms: u64,
    registration_timeout_ms: u64,
    disruption_poll_ms: u64,
    max_instance_types: usize,
    reserved_enis: u32,
    vm_memory_overhead_per_mille: u32,
    preference_policy: PreferencePolicy,
    min_values_policy: MinValuesPolicy,
    consolidation_payback_horizon_ms: u64,
    eviction_cost_micro_usd: u64,
}

/// [`Config`] as format version 2 laid it out: version 1's and the sibling hold.
#[derive(Deserialize)]
struct ConfigV2 {
    cluster_name: String,
    seed: u64,
    batch_idle_ms: u64,
    batch_max_ms: u64,
    launch_timeout_ms: u64,
    registration_timeout_ms: u64,
    disruption_poll_ms: u64,
    max_instance_types: usize,
    reserved_enis: u32,
    vm_memory_overhead_per_mille: u32,
    preference_policy: PreferencePolicy,
    min_values_policy: MinValuesPolicy,
    consolidation_payback_horizon_ms: u64,
    eviction_cost_micro_usd: u64,
    sibling_hold_ms: u64,
}

impl From<ConfigV1> for ConfigV2 {
    fn from(v1: ConfigV1) -> Self {
        ConfigV2 {
            cluster_name: v1.cluster_name,
            seed: v1.seed,
            batch_idle_ms: v1.batch_idle_ms,
            batch_max_ms: v1.batch_max_ms,
            launch_timeout_ms: v1.launch_timeout_ms,
            registration_timeout_ms: v1.registration_timeout_ms,
            disruption_poll_ms: v1.disruption_poll_ms,
            max_instance_types: v1.max_instance_types,
            reserved_enis: v1.reserved_enis,
            vm_memory_overhead_per_mille: v1.vm_memory_overhead_per_mille,
            preference_policy: v1.preference_policy,
            min_values_policy: v1.min_values_policy,
            consolidation_payback_horizon_ms: v1.consolidation_payback_horizon_ms,
            eviction_cost_micro_usd: v1.eviction_cost_micro_usd,
            sibling_hold_ms: 0,
        }
    }
}

/// [`Config`] as format versions 3 to 5 laid it out: version 2's and whose lost work counts.
/// (Postcard reads a struct, or a tuple, field by field: version 2's fields, then the one.)
#[derive(Deserialize)]
struct ConfigV5(ConfigV2, LostWork);

/// [`Config`] as format version 6 laid it out: version 5's and `separate_when_cheaper`.
#[derive(Deserialize)]
struct ConfigV6(ConfigV2, LostWork, bool);

impl From<ConfigV6> for Config {
    fn from(ConfigV6(v2, count_lost_work, separate_when_cheaper): ConfigV6) -> Self {
        Config {
            count_lost_work,
            separate_when_cheaper,
            ..Config::from(v2)
        }
    }
}

impl From<ConfigV5> for Config {
    fn from(ConfigV5(v2, count_lost_work): ConfigV5) -> Self {
        Config {
            count_lost_work,
            ..Config::from(v2)
        }
    }
}

impl From<ConfigV2> for Config {
    fn from(v2: ConfigV2) -> Self {
        Config {
            cluster_name: v2.cluster_name,
            seed: v2.seed,
            batch_idle_ms: v2.batch_idle_ms,
            batch_max_ms: v2.batch_max_ms,
            launch_timeout_ms: v2.launch_timeout_ms,
            registration_timeout_ms: v2.registration_timeout_ms,
            disruption_poll_ms: v2.disruption_poll_ms,
            max_instance_types: v2.max_instance_types,
            reserved_enis: v2.reserved_enis,
            vm_memory_overhead_per_mille: v2.vm_memory_overhead_per_mille,
            preference_policy: v2.preference_policy,
            min_values_policy: v2.min_values_policy,
            consolidation_payback_horizon_ms: v2.consolidation_payback_horizon_ms,
            eviction_cost_micro_usd: v2.eviction_cost_micro_usd,
            sibling_hold_ms: v2.sibling_hold_ms,
            count_lost_work: LostWork::Off,
            separate_when_cheaper: false,
            expiration_waits_for_jobs: false,
        }
    }
}

impl<C: Into<Config>> From<OldLogHeader<C>> for LogHeader {
    fn from(old: OldLogHeader<C>) -> Self {
        LogHeader {
            producer: old.producer,
            config: old.config.into(),
            source: old.source,
        }
    }
}

impl From<ConfigV1> for Config {
    fn from(v1: ConfigV1) -> Self {
        ConfigV2::from(v1).into()
    }
}

/// A [`LogHeader`] is read in the layout of the format `version` it was written in.
impl super::Header for LogHeader {
    fn decode(version: u16, payload: &[u8]) -> Result<Self, String> {
        match version {
            1 => frame::decode_payload::<OldLogHeader<ConfigV1>>(payload).map(LogHeader::from),
            2 => frame::decode_payload::<OldLogHeader<ConfigV2>>(payload).map(LogHeader::from),
            3..=5 => frame::decode_payload::<OldLogHeader<ConfigV5>>(payload).map(LogHeader::from),
            6 => frame::decode_payload::<OldLogHeader<ConfigV6>>(payload).map(LogHeader::from),
            _ => frame::decode_payload(payload),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::*;
    use crate::eventlog::{LogRecord, MAGIC, NwlogReader, RedbStore, STORE_FORMAT_VERSION};

    /// A version-1 header as nodewright 0.1.0 wrote it: today's fields but the last.
    #[derive(Serialize)]
    struct WrittenV1<'a> {
        producer: &'a str,
        #[allow(clippy::type_complexity)]
        config: (
            &'a str,
            [u64; 6],
            usize,
            [u32; 2],
            PreferencePolicy,
            MinValuesPolicy,
            [u64; 2],
        ),
        source: &'a str,
    }

    fn v1_of(c: &Config) -> WrittenV1<'_> {
        WrittenV1 {
            producer: "nodewright 0.1.0",
            // postcard writes a tuple and an array field by field, as it writes a struct.
            config: (
                &c.cluster_name,
                [
                    c.seed,
                    c.batch_idle_ms,
                    c.batch_max_ms,
                    c.launch_timeout_ms,
                    c.registration_timeout_ms,
                    c.disruption_poll_ms,
                ],
                c.max_instance_types,
                [c.reserved_enis, c.vm_memory_overhead_per_mille],
                c.preference_policy,
                c.min_values_policy,
                [
                    c.consolidation_payback_horizon_ms,
                    c.eviction_cost_micro_usd,
                ],
            ),
            source: "seed-tutorial",
        }
    }

    fn custom() -> Config {
        Config {
            cluster_name: "prod".into(),
            seed: 42,
            batch_idle_ms: 2_000,
            reserved_enis: 1,
            eviction_cost_micro_usd: 7,
            ..Config::default()
        }
    }

    fn upgraded() -> Config {
        Config {
            sibling_hold_ms: 0,
            count_lost_work: LostWork::Off,
            separate_when_cheaper: false,
            expiration_waits_for_jobs: false,
            ..custom()
        }
    }

    /// The configuration as format version 2 laid it out: version 1's and the sibling hold.
    type ConfigV2Written<'a> = (
        &'a str,
        [u64; 6],
        usize,
        [u32; 2],
        PreferencePolicy,
        MinValuesPolicy,
        [u64; 3],
    );

    /// A version-2 header as nodewright 0.2.0 wrote it.
    #[derive(Serialize)]
    struct WrittenV2<'a> {
        producer: &'a str,
        config: ConfigV2Written<'a>,
        source: &'a str,
    }

    fn v2_of(c: &Config) -> WrittenV2<'_> {
        let v1 = v1_of(c);
        WrittenV2 {
            producer: "nodewright 0.2.0",
            config: (
                v1.config.0,
                v1.config.1,
                v1.config.2,
                v1.config.3,
                v1.config.4,
                v1.config.5,
                [
                    c.consolidation_payback_horizon_ms,
                    c.eviction_cost_micro_usd,
                    c.sibling_hold_ms,
                ],
            ),
            source: v1.source,
        }
    }

    #[test]
    fn a_version_2_header_reads_counting_no_lost_work_and_every_other_setting_kept() {
        let held = Config {
            sibling_hold_ms: 90_000,
            ..custom()
        };
        let bytes = postcard::to_stdvec(&v2_of(&held)).unwrap();
        let header = <LogHeader as crate::eventlog::Header>::decode(2, &bytes).unwrap();
        assert_eq!(header.producer, "nodewright 0.2.0");
        assert_eq!(
            header.config,
            Config {
                count_lost_work: LostWork::Off,
                separate_when_cheaper: false,
                expiration_waits_for_jobs: false,
                ..held
            }
        );
        // Read as today's layout, the same bytes are refused rather than misread.
        assert!(<LogHeader as crate::eventlog::Header>::decode(3, &bytes).is_err());
    }

    #[test]
    fn a_version_1_header_reads_with_the_hold_off_and_every_other_setting_kept() {
        let bytes = postcard::to_stdvec(&v1_of(&custom())).unwrap();
        let header = <LogHeader as crate::eventlog::Header>::decode(1, &bytes).unwrap();
        assert_eq!(header.producer, "nodewright 0.1.0");
        assert_eq!(header.source, "seed-tutorial");
        assert_eq!(header.config, upgraded());
        // Read as today's layout, the same bytes are refused rather than misread.
        assert!(<LogHeader as crate::eventlog::Header>::decode(3, &bytes).is_err());
    }

    #[test]
    fn a_version_7_header_round_trips() {
        let header = LogHeader::new(custom(), "test");
        assert_eq!(header.config.count_lost_work, LostWork::AllButReplicated);
        assert!(header.config.separate_when_cheaper);
        assert!(header.config.expiration_waits_for_jobs);
        let bytes = postcard::to_stdvec(&header).unwrap();
        assert_eq!(
            <LogHeader as crate::eventlog::Header>::decode(7, &bytes).unwrap(),
            header
        );
        // Read as version 6's or 5's layout, the same bytes are refused rather than misread.
        assert!(<LogHeader as crate::eventlog::Header>::decode(6, &bytes).is_err());
        assert!(<LogHeader as crate::eventlog::Header>::decode(5, &bytes).is_err());
    }

    #[test]
    fn a_version_6_header_reads_evicting_expired_machines_and_every_other_setting_kept() {
        let held = Config {
            sibling_hold_ms: 90_000,
            ..custom()
        };
        for separate in [true, false] {
            let v2 = v2_of(&held);
            let v6 = WrittenAfterV2 {
                producer: "nodewright 0.6.0",
                config: (v2.config, (LostWork::Jobs, separate)),
                source: v2.source,
            };
            let bytes = postcard::to_stdvec(&v6).unwrap();
            let header = <LogHeader as crate::eventlog::Header>::decode(6, &bytes).unwrap();
            assert_eq!(header.producer, "nodewright 0.6.0");
            assert_eq!(
                header.config,
                Config {
                    count_lost_work: LostWork::Jobs,
                    separate_when_cheaper: separate,
                    expiration_waits_for_jobs: false,
                    ..held.clone()
                }
            );
        }
    }

    /// A header as versions 3 to 5 wrote it: version 2's configuration and, after it,
    /// `count_lost_work` — as a bool in version 4 (nodewright 0.4.0), as `LostWork` in 3 to 5.
    /// Postcard writes a tuple as its fields one after another.
    #[derive(Serialize)]
    struct WrittenAfterV2<'a, LostWorkAs> {
        producer: &'a str,
        config: (ConfigV2Written<'a>, LostWorkAs),
        source: &'a str,
    }

    #[test]
    fn a_version_5_header_reads_without_separating_machines_and_every_other_setting_kept() {
        let held = Config {
            sibling_hold_ms: 90_000,
            ..custom()
        };
        let v2 = v2_of(&held);
        let v5 = WrittenAfterV2 {
            producer: "nodewright 0.5.0",
            config: (v2.config, LostWork::AllButReplicated),
            source: v2.source,
        };
        let bytes = postcard::to_stdvec(&v5).unwrap();
        for version in [3, 4, 5] {
            let header = <LogHeader as crate::eventlog::Header>::decode(version, &bytes).unwrap();
            assert_eq!(header.producer, "nodewright 0.5.0");
            assert_eq!(
                header.config,
                Config {
                    separate_when_cheaper: false,
                    expiration_waits_for_jobs: false,
                    ..held.clone()
                }
            );
        }
    }

    #[test]
    fn a_version_4_header_reads_its_switch_as_jobs_or_off_and_every_other_setting_kept() {
        let held = Config {
            sibling_hold_ms: 90_000,
            ..custom()
        };
        for (switch, read_as) in [(true, LostWork::Jobs), (false, LostWork::Off)] {
            let v2 = v2_of(&held);
            let v4 = WrittenAfterV2 {
                producer: "nodewright 0.4.0",
                config: (v2.config, switch),
                source: v2.source,
            };
            let bytes = postcard::to_stdvec(&v4).unwrap();
            let header = <LogHeader as crate::eventlog::Header>::decode(4, &bytes).unwrap();
            assert_eq!(header.producer, "nodewright 0.4.0");
            assert_eq!(
                header.config,
                Config {
                    count_lost_work: read_as,
                    separate_when_cheaper: false,
                    expiration_waits_for_jobs: false,
                    ..held.clone()
                }
            );
            // And the same bytes are version 5's encoding of that setting.
            let v5 = WrittenAfterV2 {
                producer: "nodewright 0.4.0",
                config: (v2_of(&held).config, read_as),
                source: "seed-tutorial",
            };
            assert_eq!(postcard::to_stdvec(&v5).unwrap(), bytes);
        }
    }

    #[test]
    fn a_version_1_nwlog_file_opens_upgraded() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        frame::encode_value_frame(&v1_of(&custom()), &mut bytes).unwrap();
        let reader = NwlogReader::<LogHeader, LogRecord, _>::new(&bytes[..]).unwrap();
        assert_eq!(reader.format_version(), 1);
        assert_eq!(reader.header().config, upgraded());
    }

    #[test]
    fn a_version_1_store_opens_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        let header = LogHeader::new(custom(), "t");
        let store = RedbStore::<LogHeader, LogRecord>::create(&path, &header).unwrap();
        assert_eq!(store.header(), &header);
        drop(store);
        // Make it what a version-1 build wrote: its version and its header layout.
        {
            let db = redb::Database::open(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let meta: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("meta");
                let mut table = txn.open_table(meta).unwrap();
                table
                    .insert("format_version", 1u16.to_le_bytes().as_slice())
                    .unwrap();
                let v1 = frame::encode_checked_value(&v1_of(&custom())).unwrap();
                table.insert("header", v1.as_slice()).unwrap();
            }
            txn.commit().unwrap();
        }
        assert_ne!(STORE_FORMAT_VERSION, 1);
        let store = RedbStore::<LogHeader, LogRecord>::open(&path).unwrap();
        assert_eq!(store.header().config, upgraded());
        drop(store);
        // Opened by this build, it is this build's: its version and its header say so, and
        // it reads the same again.
        {
            use redb::ReadableDatabase;
            let db = redb::Database::open(&path).unwrap();
            let txn = db.begin_read().unwrap();
            let meta: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("meta");
            let table = txn.open_table(meta).unwrap();
            let version = table
                .get("format_version")
                .unwrap()
                .unwrap()
                .value()
                .to_vec();
            assert_eq!(version, STORE_FORMAT_VERSION.to_le_bytes());
        }
        let store = RedbStore::<LogHeader, LogRecord>::open(&path).unwrap();
        assert_eq!(store.header().config, upgraded());
    }
}
