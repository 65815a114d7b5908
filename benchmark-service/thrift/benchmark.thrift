// The benchmark service of brisk's suite, for the volo-thrift player
// (crates/benchmark-service/src/players/volo.rs). It mirrors `BenchmarkService` in
// src/service.rs method for method; `Message` mirrors src/store/message.rs field for field.
// Code is generated at build time by build.rs through volo-build (pilota): no external compiler.

namespace rs benchmark

// One benchmark record (ids 1..=10 are seeded).
struct Message {
    1: required i64 id,
    2: required i64 from_uid,
    3: required i64 to_uid,
    4: required string content,
}

// A lookup in the store failed: `not_found` for an id that is not seeded (the only
// non-infrastructure failure), otherwise a file or database error; `message` is the store's
// own description of it.
exception StoreFailure {
    1: required string message,
    2: required bool not_found,
}

service BenchmarkService {
    // `nth`: nothing at all.
    void do_nothing(),
    // `cache`: one of the 10 records from the in-process cache.
    Message get_message_from_cache(1: i64 id) throws (1: StoreFailure failure),
    // `file`: reads and parses messages.json, then finds the record.
    Message get_message_from_file(1: i64 id) throws (1: StoreFailure failure),
    // `db`: select ... from message where id = ? on the configured database.
    Message get_message_from_db(1: i64 id) throws (1: StoreFailure failure),
    // `echo`: the same bytes back.
    binary echo(1: binary data),
}
