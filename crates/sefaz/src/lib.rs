//! A SEFAZ simulator for NFC-e (modelo 65, leiaute 4.00), its own process with its own durable
//! store, answering the web services a till calls as SEFAZ answers them, over SOAP 1.2 (the
//! messages are `nfce::soap`, shared with the till's side):
//!
//! - `POST /ws/NFeAutorizacao4` (`enviNFe`, synchronous): each note is checked against the
//!   official schema by `xmllint` (225) and its signature by `xmlsec1` (297), its certificate
//!   against its emitter (213), its state and environment (226, 252); then the base decides: a
//!   key already authorized is **204** "Duplicidade de NF-e" (with its protocol in the reason),
//!   a number authorized under another key **539**, otherwise **100** with a protocol number.
//!   An emitter whose rejections in the last hour reach the limit is refused **656** "Consumo
//!   Indevido" until they age out.
//! - `POST /ws/NFeConsultaProtocolo4` (`consSitNFe`): 100 with the protocol, 101 with it and the
//!   cancellation's event (`procEventoNFe`) for a cancelled note, or 217 "NF-e não consta na base
//!   de dados".
//! - `POST /ws/NFeStatusServico4`: 107 "Serviço em Operação".
//! - `POST /ws/NFeInutilizacao4` (`inutNFe`, checked by `xmllint` and `xmlsec1` like a note):
//!   **102** with a protocol; **563** for a range declared before, **256** for one overlapping
//!   it, **241** when a number of it is an authorized note; a note whose number was declared
//!   unused is then refused **206**.
//! - `POST /ws/NFeRecepcaoEvento4` (`envEvento`, one event): the cancelamento (110111, checked
//!   with its own schema, within 30 minutes of the authorization) and the cancelamento por
//!   substituição (110112, the generic event schema — 110112's own is not in the installed
//!   package — and its fields here: the replacing note `chNFeRef` authorized, uncancelled, of
//!   the same emitter; within 168 hours). **135** with a protocol; **573** for the same event
//!   again (registered: a lost answer), **218** for a note already cancelled, **222** for a
//!   protocol not the note's, **494** for no such note, **501** past the window, **574** for
//!   another emitter. A cancelled note stays in `/qa/notas` with its event's protocol.
//!
//! QA: `PUT /qa/modo` plays SEFAZ down (503), slow, or answering only after the till gave up
//! (the note authorized, the answer lost); `GET /qa/notas` and `/qa/contagens` read its base.
//! Where it differs from a real SEFAZ: plain HTTP on loopback (no mutual TLS with the
//! certificate), one state and environment per process, no asynchronous lote (`indSinc` 0), no
//! event but the two cancellations (the substitute's refusal code, 694, is this simulator's),
//! the 656 rule counts every rejection of an emitter (SEFAZ counts repeated identical ones), and
//! no time rules on `dhEmi`.

mod api;
mod checagem;
mod store;

pub use api::Modo;
pub use store::{Autorizada, Contagens};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// How to start the simulator.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "sefaz",
    about = "SEFAZ simulator for NFC-e (autorização, consulta, status, inutilização, eventos)"
)]
pub struct Config {
    /// Address to listen on (port 0: any free port; the chosen address is printed).
    #[arg(long, env = "SEFAZ_LISTEN", default_value = "127.0.0.1:8093")]
    pub listen: SocketAddr,
    /// Its own SQLite file (authorized notes, rejections).
    #[arg(long, env = "SEFAZ_DATABASE", default_value = "sefaz.db")]
    pub database: PathBuf,
    /// The official schemas of leiaute 4.00 (`make deps-nfce` puts them in target/nfce-xsd).
    #[arg(long, env = "SEFAZ_XSD_DIR", default_value = "target/nfce-xsd")]
    pub xsd_dir: PathBuf,
    /// The state it authorizes for (its abbreviation).
    #[arg(long, env = "SEFAZ_UF", default_value = "SP")]
    pub uf: String,
    /// 1 production, 2 homologação.
    #[arg(long, env = "SEFAZ_TP_AMB", default_value_t = 2)]
    pub tp_amb: u8,
    /// Rejections of one emitter in an hour after which it is refused 656.
    #[arg(long, env = "SEFAZ_LIMITE_REJEICOES", default_value_t = 20)]
    pub limite_rejeicoes: u64,
    /// Hours after its authorization a note may be cancelled by substitution (110112).
    #[arg(long, env = "SEFAZ_PRAZO_SUBSTITUICAO_HORAS", default_value_t = 168)]
    pub prazo_substituicao_horas: u32,
    /// Minutes after its authorization a note may be cancelled (110111).
    #[arg(long, env = "SEFAZ_PRAZO_CANCELAMENTO_MINUTOS", default_value_t = 30)]
    pub prazo_cancelamento_minutos: u32,
}

impl Config {
    /// Loopback, any port, São Paulo in homologação, schemas in `xsd_dir`.
    pub fn sandbox(database: PathBuf, xsd_dir: PathBuf) -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            database,
            xsd_dir,
            uf: "SP".to_string(),
            tp_amb: 2,
            limite_rejeicoes: 20,
            prazo_substituicao_horas: 168,
            prazo_cancelamento_minutos: 30,
        }
    }
}

/// What can stop the simulator from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database file cannot be opened.
    #[error("banco do simulador da SEFAZ: {0}")]
    Database(#[from] rusqlite::Error),
    /// The address cannot be bound.
    #[error("não foi possível escutar em {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    /// The configuration cannot work.
    #[error("{0}")]
    Config(String),
}

/// A running simulator.
pub struct RunningSefaz {
    served: provider_kit::Served,
}

impl RunningSefaz {
    /// Its base URL; the web services are under `/ws/`.
    pub fn url(&self) -> String {
        self.served.url()
    }

    /// Stops serving and waits for it.
    pub async fn shutdown(self) {
        self.served.shutdown().await
    }
}

/// Opens the base, binds the address and serves until shut down.
pub async fn start(config: Config) -> Result<RunningSefaz, StartError> {
    let uf = nfce::Uf::parse(&config.uf).map_err(|e| StartError::Config(e.to_string()))?;
    if !matches!(config.tp_amb, 1 | 2) {
        return Err(StartError::Config("--tp-amb é 1 ou 2".into()));
    }
    let needed = ["nfe_v4.00.xsd", "evento/envEvento_v1.00.xsd"];
    if let Some(xsd) = needed
        .iter()
        .map(|f| config.xsd_dir.join(f))
        .find(|f| !f.exists())
    {
        return Err(StartError::Config(format!(
            "{} ausente: rode `make deps-nfce`",
            xsd.display()
        )));
    }
    let base = store::Base::open(&config.database)?;
    let shared = Arc::new(api::Shared {
        base,
        xsd_dir: config.xsd_dir.clone(),
        c_uf: uf.codigo(),
        tp_amb: config.tp_amb,
        limite_rejeicoes: config.limite_rejeicoes,
        prazo_substituicao_ms: i64::from(config.prazo_substituicao_horas) * 3_600_000,
        prazo_cancelamento_ms: i64::from(config.prazo_cancelamento_minutos) * 60_000,
        modo: Mutex::new(Modo::Normal),
    });
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| StartError::Bind(config.listen, e))?;
    let served = provider_kit::Served::start(listener, api::router(shared))
        .map_err(|e| StartError::Bind(config.listen, e))?;
    tracing::info!(addr = %served.addr(), uf = uf.sigla(), "SEFAZ simulator listening");
    Ok(RunningSefaz { served })
}
