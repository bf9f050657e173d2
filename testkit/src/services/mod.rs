//! Real services started by the tests themselves, on free local ports, stopped when dropped
//! (also when a test panics).

pub mod moto;
