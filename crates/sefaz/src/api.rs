//! The web services, and the QA routes that play SEFAZ's failures.

use crate::checagem::{self, Recusa};
use crate::store::{
    now_ms, Autorizada, Base, EventoEntrada, Registro, RegistroEvento, RegistroInutilizacao,
};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use nfce::soap::{self, EventoRegistrado, Pedido, Protocolo, Resposta};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the simulated SEFAZ behaves now (`PUT /qa/modo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(tag = "modo", rename_all = "kebab-case")]
pub enum Modo {
    /// Answers every request.
    Normal,
    /// Down: every web service answers 503.
    Fora,
    /// Waits `segundos` before reading each request.
    Lento {
        /// The wait.
        segundos: u64,
    },
    /// Authorizes (or registers an event), then waits `segundos` before answering: a till
    /// whose timeout is shorter never hears the answer of a note or an event SEFAZ has.
    PerdeResposta {
        /// The wait.
        segundos: u64,
    },
}

/// What every request shares.
pub struct Shared {
    pub(crate) base: Base,
    pub(crate) xsd_dir: std::path::PathBuf,
    pub(crate) c_uf: u8,
    pub(crate) tp_amb: u8,
    pub(crate) limite_rejeicoes: u64,
    /// How long after its authorization a note may be cancelled by substitution (110112).
    pub(crate) prazo_substituicao_ms: i64,
    /// How long after its authorization a note may be cancelled (110111).
    pub(crate) prazo_cancelamento_ms: i64,
    pub(crate) modo: Mutex<Modo>,
}

/// The routes.
pub fn router(s: Arc<Shared>) -> Router {
    Router::new()
        .route("/ws/{servico}", post(web_service))
        .route("/qa/modo", put(set_modo).get(get_modo))
        .route("/qa/notas", get(notas))
        .route("/qa/contagens", get(contagens))
        .with_state(s)
}

const AUTORIZADO: &str = "Autorizado o uso da NF-e";
const CANCELADA: &str = "Cancelamento de NF-e homologado";

/// The protocol of an authorized note.
fn autorizada(a: Autorizada) -> Protocolo {
    Protocolo {
        chave: a.chave,
        c_stat: 100,
        x_motivo: AUTORIZADO.to_string(),
        n_prot: Some(a.n_prot),
        dh_recbto: a.dh_recbto,
        dig_val: Some(a.dig_val),
    }
}

fn agora() -> String {
    let now = time::OffsetDateTime::now_utc()
        .to_offset(time::UtcOffset::from_hms(-3, 0, 0).expect("a valid offset"));
    nfce::data_hora(now)
}

fn soap_xml(body: String) -> Response {
    (
        [(header::CONTENT_TYPE, "application/soap+xml; charset=utf-8")],
        body,
    )
        .into_response()
}

impl Shared {
    fn resposta(&self, c_stat: u16, x_motivo: &str, protocolo: Option<Protocolo>) -> Resposta {
        Resposta {
            tp_amb: self.tp_amb,
            c_uf: self.c_uf,
            ver_aplic: "PAGAR_SEFAZ_SIM_1.0".to_string(),
            dh_recbto: agora(),
            c_stat,
            x_motivo: x_motivo.to_string(),
            protocolo,
        }
    }

    fn modo(&self) -> Modo {
        *self.modo.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A rejection of the note (the lote was processed: 104 with the note's code).
    fn rejeicao(&self, chave: &str, cnpj: &str, r: Recusa) -> Result<Resposta, String> {
        self.base
            .rejeitar(cnpj, Some(chave), r.0)
            .map_err(|e| e.to_string())?;
        let prot = Protocolo {
            chave: chave.to_string(),
            c_stat: r.0,
            x_motivo: r.1,
            n_prot: None,
            dh_recbto: agora(),
            dig_val: None,
        };
        Ok(self.resposta(104, "Lote processado", Some(prot)))
    }

    async fn autorizar(&self, nfe: &str) -> Result<Resposta, String> {
        let lida = match checagem::ler(nfe) {
            Ok(l) => l,
            Err(Recusa(c, m)) => return Ok(self.resposta(c, &m, None)),
        };
        let hora_atras = now_ms() - 3_600_000;
        let rejeicoes =
            (self.base.rejeicoes_desde(&lida.cnpj, hora_atras)).map_err(|e| e.to_string())?;
        if rejeicoes >= self.limite_rejeicoes {
            return Ok(self.resposta(656, "Rejeição: Consumo Indevido", None));
        }
        match checagem::ferramentas(nfe, &self.xsd_dir).await? {
            Some(Recusa(225, m)) => {
                (self.base.rejeitar(&lida.cnpj, Some(&lida.chave), 225))
                    .map_err(|e| e.to_string())?;
                return Ok(self.resposta(225, &m, None));
            }
            Some(r) => return self.rejeicao(&lida.chave, &lida.cnpj, r),
            None => {}
        }
        if let Some(r) = checagem::regras(&lida, self.c_uf, self.tp_amb) {
            return self.rejeicao(&lida.chave, &lida.cnpj, r);
        }
        let entrada = crate::store::Entrada {
            chave: &lida.chave,
            cnpj: &lida.cnpj,
            modelo: lida.modelo,
            serie: lida.serie,
            numero: lida.numero,
            tp_emis: lida.tp_emis,
            valor: &lida.valor,
            dig_val: &lida.dig_val,
            xml: nfe,
        };
        let registro =
            (self.base.autorizar(&entrada, self.c_uf, &agora())).map_err(|e| e.to_string())?;
        match registro {
            Registro::Nova(a) => {
                tracing::info!(chave = %a.chave, n_prot = %a.n_prot, "NFC-e autorizada");
                Ok(self.resposta(104, "Lote processado", Some(autorizada(a))))
            }
            Registro::MesmaChave(a) => self.rejeicao(
                &lida.chave,
                &lida.cnpj,
                Recusa(
                    204,
                    format!(
                        "Rejeição: Duplicidade de NF-e [nProt:{}][dhAut:{}]",
                        a.n_prot, a.dh_recbto
                    ),
                ),
            ),
            Registro::Inutilizada => self.rejeicao(
                &lida.chave,
                &lida.cnpj,
                Recusa(
                    206,
                    "Rejeição: NF-e já está inutilizada na Base de dados da SEFAZ".to_string(),
                ),
            ),
            Registro::OutraChave(a) => self.rejeicao(
                &lida.chave,
                &lida.cnpj,
                Recusa(
                    539,
                    format!(
                        "Rejeição: Duplicidade de NF-e, com diferença na Chave de Acesso [chNFe:{}][nProt:{}][dhAut:{}]",
                        a.chave, a.n_prot, a.dh_recbto
                    ),
                ),
            ),
        }
    }

    /// An inutilização: its code, and its protocol when homologated.
    async fn inutilizar(&self, xml: &str) -> Result<(Resposta, Option<String>), String> {
        let inut = match checagem::ler_inutilizacao(xml) {
            Ok(i) => i,
            Err(Recusa(c, m)) => return Ok((self.resposta(c, &m, None), None)),
        };
        let hora_atras = now_ms() - 3_600_000;
        let rejeicoes =
            (self.base.rejeicoes_desde(&inut.cnpj, hora_atras)).map_err(|e| e.to_string())?;
        if rejeicoes >= self.limite_rejeicoes {
            return Ok((self.resposta(656, "Rejeição: Consumo Indevido", None), None));
        }
        let xsd = self.xsd_dir.join("inutNFe_v4.00.xsd");
        let refused = match checagem::ferramentas_de(xml, &xsd, "infInut").await? {
            Some(r) => Some(r),
            None => checagem::regras_inutilizacao(&inut, self.c_uf, self.tp_amb),
        };
        let refusal = match refused {
            Some(r) => r,
            None => {
                let faixa = crate::store::Faixa {
                    cnpj: &inut.cnpj,
                    modelo: inut.modelo,
                    serie: inut.serie,
                    inicio: inut.inicio,
                    fim: inut.fim,
                    xml,
                };
                let registro = self.base.inutilizar(&faixa, self.c_uf, &agora());
                match registro.map_err(|e| e.to_string())? {
                    RegistroInutilizacao::Nova(n_prot) => {
                        let ok = self.resposta(102, "Inutilização de número homologado", None);
                        return Ok((ok, Some(n_prot)));
                    }
                    RegistroInutilizacao::MesmaFaixa => Recusa(
                        563,
                        "Rejeição: Já existe pedido de Inutilização com a mesma faixa de inutilização"
                            .to_string(),
                    ),
                    RegistroInutilizacao::Sobreposta => Recusa(
                        256,
                        "Rejeição: Uma NF-e da faixa já está inutilizada na Base de dados da SEFAZ"
                            .to_string(),
                    ),
                    RegistroInutilizacao::NumeroUsado => Recusa(
                        241,
                        "Rejeição: Um número da faixa já foi utilizado".to_string(),
                    ),
                }
            }
        };
        (self.base.rejeitar(&inut.cnpj, None, refusal.0)).map_err(|e| e.to_string())?;
        Ok((self.resposta(refusal.0, &refusal.1, None), None))
    }

    /// An event that cancels a note: SEFAZ's code for it, the key and type it names, and its
    /// protocol when registered.
    async fn evento(
        &self,
        envio: &str,
    ) -> Result<(Resposta, String, String, Option<String>), String> {
        let ev = match checagem::ler_evento(envio) {
            Ok(e) => e,
            Err(Recusa(c, m)) => {
                return Ok((
                    self.resposta(c, &m, None),
                    String::new(),
                    String::new(),
                    None,
                ))
            }
        };
        let answer = |r: Resposta, n_prot| Ok((r, ev.chave.clone(), ev.tp_evento.clone(), n_prot));
        let hora_atras = now_ms() - 3_600_000;
        let rejeicoes =
            (self.base.rejeicoes_desde(&ev.cnpj, hora_atras)).map_err(|e| e.to_string())?;
        if rejeicoes >= self.limite_rejeicoes {
            return answer(self.resposta(656, "Rejeição: Consumo Indevido", None), None);
        }
        let refused = match checagem::schema_do_evento(&ev.tp_evento) {
            None => Some(Recusa(
                490,
                "Rejeição: Tipo do evento não previsto para este Web Service".to_string(),
            )),
            Some(xsd) => {
                match checagem::ferramentas_de(envio, &self.xsd_dir.join(xsd), "infEvento").await? {
                    Some(r) => Some(r),
                    None => checagem::regras_evento(&ev, self.c_uf, self.tp_amb),
                }
            }
        };
        let refusal = match refused {
            Some(r) => r,
            None => {
                let prazo = if ev.tp_evento == "110112" {
                    self.prazo_substituicao_ms
                } else {
                    self.prazo_cancelamento_ms
                };
                let entrada = EventoEntrada {
                    chave: &ev.chave,
                    tp_evento: &ev.tp_evento,
                    n_seq: ev.n_seq,
                    n_prot: &ev.n_prot,
                    substituta: ev.substituta.as_deref(),
                    xml: envio,
                };
                let registro = self.base.cancelar(&entrada, self.c_uf, &agora(), prazo);
                match registro.map_err(|e| e.to_string())? {
                    RegistroEvento::Novo(n_prot) => {
                        tracing::info!(chave = %ev.chave, tp_evento = %ev.tp_evento, %n_prot, "evento registrado");
                        let ok = self.resposta(135, "Evento registrado e vinculado a NF-e", None);
                        return answer(ok, Some(n_prot));
                    }
                    RegistroEvento::Duplicado => {
                        Recusa(573, "Rejeição: Duplicidade de Evento".to_string())
                    }
                    RegistroEvento::NotaInexistente => {
                        Recusa(494, "Rejeição: Chave de Acesso inexistente".to_string())
                    }
                    RegistroEvento::JaCancelada => Recusa(
                        218,
                        "Rejeição: NF-e já está cancelada na base de dados da SEFAZ".to_string(),
                    ),
                    RegistroEvento::ProtocoloDiverge => Recusa(
                        222,
                        "Rejeição: Protocolo de Autorização de Uso difere do cadastrado"
                            .to_string(),
                    ),
                    RegistroEvento::ForaDoPrazo => Recusa(
                        501,
                        "Rejeição: Prazo de cancelamento superior ao previsto na Legislação"
                            .to_string(),
                    ),
                    RegistroEvento::SubstitutaInvalida => Recusa(
                        694,
                        "Rejeição: NFC-e substituta inexistente, cancelada ou de outro emitente"
                            .to_string(),
                    ),
                }
            }
        };
        (self.base.rejeitar(&ev.cnpj, Some(&ev.chave), refusal.0)).map_err(|e| e.to_string())?;
        answer(self.resposta(refusal.0, &refusal.1, None), None)
    }

    /// A consulta by key: 100 with the authorization's protocol, 101 with it and the
    /// cancellation's event when the note was cancelled, 217 when SEFAZ has no such note.
    fn consultar(&self, chave: &str) -> Result<(Resposta, Vec<EventoRegistrado>), String> {
        if nfce::Chave::parse(chave).is_err() {
            let r = self.resposta(
                236,
                "Rejeição: Chave de Acesso inválida (dígito verificador)",
                None,
            );
            return Ok((r, Vec::new()));
        }
        let Some(a) = self.base.nota(chave).map_err(|e| e.to_string())? else {
            let r = self.resposta(
                217,
                "Rejeição: NF-e não consta na base de dados da SEFAZ",
                None,
            );
            return Ok((r, Vec::new()));
        };
        let eventos = self.base.eventos(chave).map_err(|e| e.to_string())?;
        let r = match a.cancelamento {
            Some(_) => self.resposta(101, CANCELADA, Some(autorizada(a))),
            None => self.resposta(100, AUTORIZADO, Some(autorizada(a))),
        };
        Ok((r, eventos))
    }
}

async fn web_service(
    State(s): State<Arc<Shared>>,
    Path(servico): Path<String>,
    body: String,
) -> Response {
    let modo = s.modo();
    match modo {
        Modo::Fora => {
            return (StatusCode::SERVICE_UNAVAILABLE, "Serviço indisponível").into_response()
        }
        Modo::Lento { segundos } => tokio::time::sleep(Duration::from_secs(segundos)).await,
        _ => {}
    }
    let pedido = match soap::ler_pedido(&body) {
        Ok(p) => p,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let answer = match (servico.as_str(), pedido) {
        ("NFeAutorizacao4", Pedido::Autorizacao { nfe, .. }) => {
            let r = s.autorizar(&nfe).await;
            if let Modo::PerdeResposta { segundos } = modo {
                tokio::time::sleep(Duration::from_secs(segundos)).await;
            }
            r.map(|r| soap::resposta_autorizacao(&r))
        }
        ("NFeConsultaProtocolo4", Pedido::Consulta { chave, .. }) => s
            .consultar(&chave)
            .map(|(r, eventos)| soap::resposta_consulta(&r, &chave, &eventos)),
        ("NFeInutilizacao4", Pedido::Inutilizacao { inut }) => s
            .inutilizar(&inut)
            .await
            .map(|(r, n_prot)| soap::resposta_inutilizacao(&r, n_prot.as_deref())),
        ("NFeRecepcaoEvento4", Pedido::Evento { envio }) => {
            let r = s.evento(&envio).await;
            if let Modo::PerdeResposta { segundos } = modo {
                tokio::time::sleep(Duration::from_secs(segundos)).await;
            }
            r.map(|(r, chave, tp, n_prot)| {
                nfce::evento::resposta(&r, &chave, &tp, n_prot.as_deref())
            })
        }
        ("NFeStatusServico4", Pedido::Status { .. }) => Ok(soap::resposta_status(&s.resposta(
            107,
            "Serviço em Operação",
            None,
        ))),
        _ => return (StatusCode::NOT_FOUND, "serviço desconhecido").into_response(),
    };
    match answer {
        Ok(xml) => soap_xml(xml),
        Err(e) => {
            tracing::error!(error = %e, "falha do simulador");
            soap_xml(soap::resposta_autorizacao(&s.resposta(
                999,
                "Rejeição: Erro não catalogado",
                None,
            )))
        }
    }
}

async fn set_modo(State(s): State<Arc<Shared>>, Json(modo): Json<Modo>) -> Json<Modo> {
    *s.modo.lock().unwrap_or_else(|p| p.into_inner()) = modo;
    tracing::info!(?modo, "modo do simulador");
    Json(modo)
}

async fn get_modo(State(s): State<Arc<Shared>>) -> Json<Modo> {
    Json(s.modo())
}

async fn notas(State(s): State<Arc<Shared>>) -> Response {
    match s.base.notas() {
        Ok(n) => Json(n).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn contagens(State(s): State<Arc<Shared>>) -> Response {
    match s.base.contagens() {
        Ok(c) => Json(c).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
