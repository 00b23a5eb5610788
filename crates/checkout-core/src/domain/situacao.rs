//! What a send of a note to SEFAZ came to, as the till records it: the client reads it from
//! SEFAZ's answer (`fiscal`), the outbox moves the note by it (`outbox/notas.rs`).

use nfce::soap::Protocolo;

/// Where a note stands after a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Situacao {
    /// Authorized (answered now, or found by a consulta): keep the protocol with the note.
    Autorizada(Protocolo),
    /// The note as it is will never be authorized (code and reason): it needs a person.
    Rejeitada(u16, String),
    /// SEFAZ has this number under another key (539): the number is spent.
    NumeroComOutraChave(String),
    /// SEFAZ blocks the emitter for an hour (656): send nothing until then.
    ConsumoIndevido,
    /// No answer heard and no consulta could settle it: send the same note again later (SEFAZ
    /// answers 204 if the first send had reached it).
    SemResposta(String),
}
