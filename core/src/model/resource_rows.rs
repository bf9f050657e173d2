//! Many [`Resources`] as rows of integers over one list of names, for the component-wise
//! maximum over a set of them — what a solve asks of a planned machine's instance types each
//! time a pod narrows them — to be a loop over integers instead of a merge of name maps.

use super::resources::Resources;

/// Rows of one width: CPU, memory and pods, then every extended resource any row has (by a
/// name list shared by all rows; a row without one holds zero there).
#[derive(Debug, Clone, Default)]
pub struct ResourceRows {
    extended: Vec<String>,
    width: usize,
    cells: Vec<i64>,
}

impl ResourceRows {
    /// The rows of `rows`, in order.
    pub fn new<'a>(rows: impl IntoIterator<Item = &'a Resources>) -> Self {
        let rows: Vec<&Resources> = rows.into_iter().collect();
        let mut extended: Vec<String> = rows
            .iter()
            .flat_map(|r| r.extended.keys().map(str::to_string))
            .collect();
        extended.sort();
        extended.dedup();
        let width = 3 + extended.len();
        let mut cells = Vec::with_capacity(width * rows.len());
        for r in rows {
            cells.extend([r.cpu_milli, r.memory_bytes, r.pods]);
            cells.extend(extended.iter().map(|name| r.extended(name)));
        }
        ResourceRows {
            extended,
            width,
            cells,
        }
    }

    /// How many rows it holds.
    pub fn len(&self) -> usize {
        self.cells.len().checked_div(self.width).unwrap_or(0)
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// `resources` as a row over these rows' names, for [`ResourceRows::holds`]; none when it
    /// asks for an extended resource no row has (then no row holds it).
    pub fn row_of(&self, resources: &Resources) -> Option<Vec<i64>> {
        if resources.extended.iter().any(|(name, &amount)| {
            amount > 0
                && self
                    .extended
                    .binary_search_by(|held| held.as_str().cmp(name))
                    .is_err()
        }) {
            return None;
        }
        let mut row = vec![resources.cpu_milli, resources.memory_bytes, resources.pods];
        // An extended resource it does not name is not compared (as `fits_in` does not): the
        // least amount there is.
        row.extend(
            self.extended
                .iter()
                .map(|name| resources.extended.get(name).copied().unwrap_or(i64::MIN)),
        );
        Some(row)
    }

    /// Whether row `i` holds `row` (made by [`ResourceRows::row_of`]) amount by amount: what
    /// [`Resources::fits_in`] says of the resources `row` was made of and the `i`-th row's.
    pub fn holds(&self, i: usize, row: &[i64]) -> bool {
        let cells = &self.cells[i * self.width..(i + 1) * self.width];
        row.iter().zip(cells).all(|(want, has)| want <= has)
    }

    /// The component-wise maximum of the rows at `indices`, starting from zero: exactly
    /// [`Resources::max_assign`] of each row into `Resources::default()`, in any order.
    pub fn max_of(&self, indices: impl IntoIterator<Item = usize>) -> Resources {
        let mut max = vec![0i64; self.width];
        for i in indices {
            let row = &self.cells[i * self.width..(i + 1) * self.width];
            for (m, &v) in max.iter_mut().zip(row) {
                *m = (*m).max(v);
            }
        }
        let mut out = Resources::new(max[0], max[1], max[2]);
        for (name, &amount) in self.extended.iter().zip(&max[3..]) {
            // `max_assign` keeps an extended resource only once a row has some of it.
            if amount > 0 {
                out.set_extended(name, amount);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NAMES: [&str; 3] = [
        "aws.amazon.com/neuron",
        "ephemeral-storage",
        "nvidia.com/gpu",
    ];

    fn resources() -> impl Strategy<Value = Resources> {
        (
            -5i64..50,
            -5i64..50,
            -5i64..50,
            proptest::collection::vec((0usize..3, -5i64..50), 0..3),
        )
            .prop_map(|(cpu, memory, pods, extended)| {
                let mut r = Resources::new(cpu, memory, pods);
                for (name, amount) in extended {
                    r.set_extended(NAMES[name], amount);
                }
                r
            })
    }

    proptest! {
        /// A row of requests is held by a row of the table exactly where the requests fit in
        /// it, extended resources no row has included.
        #[test]
        fn holds_is_fits_in(
            rows in proptest::collection::vec(resources(), 1..6),
            wanted in resources(),
        ) {
            let table = ResourceRows::new(&rows);
            let row = table.row_of(&wanted);
            for (i, r) in rows.iter().enumerate() {
                let held = row.as_ref().is_some_and(|row| table.holds(i, row));
                prop_assert_eq!(held, wanted.fits_in(r), "row {}", i);
            }
        }

        /// Rows with and without extended resources, negative amounts included: the maximum
        /// over any subset is `max_assign`'s.
        #[test]
        fn max_of_is_max_assign(
            rows in proptest::collection::vec(resources(), 0..8),
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let table = ResourceRows::new(&rows);
            prop_assert_eq!(table.len(), rows.len());
            let indices: Vec<usize> = if rows.is_empty() {
                Vec::new()
            } else {
                picks.iter().map(|p| p.index(rows.len())).collect()
            };
            let mut expected = Resources::default();
            for &i in &indices {
                expected.max_assign(&rows[i]);
            }
            prop_assert_eq!(table.max_of(indices), expected);
        }
    }
}
