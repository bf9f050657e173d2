//! Criterion benchmark of one consolidation search (multi-node, then single-node) over a
//! half-full cluster (the same input as `nodewright bench consolidation`).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use nodewright_testkit::bench;

fn consolidation(c: &mut Criterion) {
    let mut group = c.benchmark_group("consolidation-search");
    group.sample_size(10);
    for (nodes, pods, pdbs) in [
        (100usize, 1000usize, 0usize),
        (1000, 10000, 0),
        (1000, 10000, 100),
    ] {
        let (config, state) = bench::consolidation_state(nodes, pods, pdbs);
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{nodes}-nodes-{pods}-pods-{pdbs}-pdbs")),
            &(config, state),
            |b, (config, state)| b.iter(|| bench::consolidation_search(config, state)),
        );
    }
    group.finish();
}

criterion_group!(benches, consolidation);
criterion_main!(benches);
