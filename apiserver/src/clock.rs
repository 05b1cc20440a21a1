//! Time source for everything the server stamps (creationTimestamp, deletionTimestamp, Event
//! times, table ages): the process's one clock, from `operator-clock`. Injectable so the whole
//! cluster can run under virtual time; nothing else in this crate reads the system clock.

pub use operator_clock::{Clock, SharedClock, SystemClock, micro_timestamp, timestamp};
