//! Criterion benchmark of one full provisioning solve over Karpenter's benchmark mix (the
//! same input as `nodewright bench scheduling`).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use nodewright_core::config::PreferencePolicy;
use nodewright_core::model::pod::Pod;
use nodewright_core::provisioning::pool_shape::PoolShapes;
use nodewright_core::provisioning::solve;
use nodewright_testkit::bench;

fn scheduling(c: &mut Criterion) {
    let mut group = c.benchmark_group("solve-mix");
    group.sample_size(10);
    for n in [100usize, 1000, 5000, 20000] {
        let config = bench::config(PreferencePolicy::Respect);
        let state = bench::state(&config);
        let pods = bench::mix(n);
        let refs: Vec<&Pod> = pods.iter().collect();
        group.throughput(criterion::Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &refs, |b, refs| {
            b.iter(|| solve(&state, &PoolShapes::default(), &config, 0, refs))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("solve-preferences");
    group.sample_size(10);
    for policy in [PreferencePolicy::Respect, PreferencePolicy::Ignore] {
        let config = bench::config(policy);
        let state = bench::state(&config);
        let pods = bench::preferences(4000);
        let refs: Vec<&Pod> = pods.iter().collect();
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{policy:?}")),
            &refs,
            |b, refs| b.iter(|| solve(&state, &PoolShapes::default(), &config, 0, refs)),
        );
    }
    group.finish();
}

criterion_group!(benches, scheduling);
criterion_main!(benches);
