//! DNS: an I/O-free message codec ([`wire`]), the parsers of `/etc/resolv.conf` and
//! `/etc/hosts` ([`conf`], [`hosts`]; pure functions over strings), an I/O-free lookup
//! machine with every rule of a stub resolver ([`LookupMachine`]), and a blocking
//! resolver that drives it over UDP and TCP ([`Resolver`]).

pub mod conf;
pub mod hosts;
pub(crate) mod machine;
pub(crate) mod resolver;
pub mod wire;

pub use conf::ResolvConf;
pub use hosts::Hosts;
pub use machine::{
    Answer, Cache, IdSource, LookupMachine, LookupParams, QueryId, QueryOptions, Source, Transmit,
    Want, DEFAULT_MAX_TTL, MAX_CNAME_CHAIN,
};
pub use resolver::{Lookup, Resolver};
