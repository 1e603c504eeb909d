//! Fuzzes `Message::decode`: no panic, no endless loop, no read past the input; and
//! whatever decodes must re-encode to something that decodes to the same message.
#![no_main]

use keel_net::dns::wire::Message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = Message::decode(data) {
        // Counts come from the sections; the decoded ones cannot exceed the input.
        let records = msg.answers.len() + msg.authority.len() + msg.additional.len();
        assert!(msg.questions.len() * 5 + records * 11 <= data.len());
        let mut out = Vec::new();
        msg.encode(&mut out);
        let mut back = Message::decode(&out).expect("re-encoded message decodes");
        back.header.counts = msg.header.counts;
        assert_eq!(back, msg);
    }
});
