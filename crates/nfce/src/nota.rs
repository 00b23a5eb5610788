//! A sale's NFC-e as the till makes it: who issues it, what was sold and how it was paid, its
//! number and how it is issued; and the `infNFe` element of leiaute 4.00 it becomes, for the
//! sale a simple retail till makes (an emitter in the Simples Nacional, CSOSN 102, consumer
//! optional by CPF).

use crate::chave::{Chave, Cnpj, Cpf, PartesChave, TipoEmissao, Uf};
use crate::error::{NfceError, Result};
use crate::xml::Xml;
use pagar_rules::decimal;
use time::format_description::FormatItem;
use time::macros::format_description;
use time::OffsetDateTime;

/// The namespace of every NF-e element.
pub const NFE_NS: &str = "http://www.portalfiscal.inf.br/nfe";

/// What every product of a note is called in homologação (SEFAZ rejects any other name there).
pub const HOMOLOGACAO: &str = "NOTA FISCAL EMITIDA EM AMBIENTE DE HOMOLOGACAO - SEM VALOR FISCAL";

pub(crate) const DATA_HORA: &[FormatItem<'static>] = format_description!(
    "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory]:[offset_minute]"
);

/// `dhEmi`, `dhCont`: local time with its offset, whole seconds.
pub fn data_hora(t: OffsetDateTime) -> String {
    t.format(DATA_HORA)
        .expect("a date of the years a note is issued in formats")
}

/// Where notes are authorized: SEFAZ's production or its homologação (tests, no fiscal value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ambiente {
    /// Production (`tpAmb` 1).
    Producao,
    /// Homologação (`tpAmb` 2).
    Homologacao,
}

impl Ambiente {
    /// `tpAmb`.
    pub fn codigo(self) -> u8 {
        match self {
            Ambiente::Producao => 1,
            Ambiente::Homologacao => 2,
        }
    }
}

/// The emitter's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endereco {
    /// Street.
    pub logradouro: String,
    /// Number (`S/N` when none).
    pub numero: String,
    /// District.
    pub bairro: String,
    /// The town's IBGE code (seven digits).
    pub codigo_municipio: u32,
    /// The town's name.
    pub municipio: String,
    /// The state.
    pub uf: Uf,
    /// CEP, eight digits.
    pub cep: String,
}

/// Who issues the note: the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emitente {
    /// Its CNPJ.
    pub cnpj: Cnpj,
    /// Its state registration (IE).
    pub ie: String,
    /// Its legal name.
    pub razao_social: String,
    /// The name on its door.
    pub nome_fantasia: Option<String>,
    /// Its address.
    pub endereco: Endereco,
}

/// A line of the sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The store's code for the product.
    pub codigo: String,
    /// What it is.
    pub descricao: String,
    /// Its NCM (eight digits).
    pub ncm: String,
    /// The operation's CFOP (a sale inside the state: 5102).
    pub cfop: u16,
    /// The unit it is sold by (`UN`, `KG`).
    pub unidade: String,
    /// How many, in thousandths of the unit (1 000 = one).
    pub quantidade_milesimos: u64,
    /// Price of one unit, in centavos.
    pub valor_unitario: i64,
}

impl Item {
    /// What the line comes to, in centavos (rounded half up).
    pub fn total(&self) -> i64 {
        (self.quantidade_milesimos as i64 * self.valor_unitario + 500) / 1000
    }
}

/// How a part of the sale was paid (`tPag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forma {
    /// Dinheiro (01).
    Dinheiro,
    /// Cartão de crédito (03).
    Credito,
    /// Cartão de débito (04).
    Debito,
    /// Vale alimentação (10).
    ValeAlimentacao,
    /// Vale refeição (11).
    ValeRefeicao,
    /// Pix dinâmico (17): the till's Pix charge.
    Pix,
}

impl Forma {
    /// Every form.
    pub const ALL: [Forma; 6] = [
        Forma::Dinheiro,
        Forma::Credito,
        Forma::Debito,
        Forma::ValeAlimentacao,
        Forma::ValeRefeicao,
        Forma::Pix,
    ];

    /// The form of `tPag` code `codigo`.
    pub fn do_codigo(codigo: &str) -> Option<Forma> {
        Forma::ALL.into_iter().find(|f| f.codigo() == codigo)
    }

    fn codigo(self) -> &'static str {
        match self {
            Forma::Dinheiro => "01",
            Forma::Credito => "03",
            Forma::Debito => "04",
            Forma::ValeAlimentacao => "10",
            Forma::ValeRefeicao => "11",
            Forma::Pix => "17",
        }
    }

    /// Paid through a card network or the Pix system (the `card` group).
    fn eletronica(self) -> bool {
        !matches!(self, Forma::Dinheiro)
    }
}

/// A payment of the sale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pagamento {
    /// How.
    pub forma: Forma,
    /// How much, in centavos (cash: what the customer handed over).
    pub valor: i64,
}

/// How the note is issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Emissao {
    /// Sent to SEFAZ for authorization before the customer leaves.
    Normal,
    /// SEFAZ or the network is unreachable: issued offline, sent later with the same XML.
    Contingencia {
        /// When the till entered contingência (`dhCont`).
        desde: OffsetDateTime,
        /// Why (`xJust`, 15 to 256 characters).
        justificativa: String,
    },
}

impl Emissao {
    /// Its `tpEmis`.
    pub fn tipo(&self) -> TipoEmissao {
        match self {
            Emissao::Normal => TipoEmissao::Normal,
            Emissao::Contingencia { .. } => TipoEmissao::ContingenciaOffline,
        }
    }
}

/// Where the state answers the consumer about a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlsConsulta {
    /// The QR Code's consultation address (`…?p=` is added).
    pub qrcode: String,
    /// The consultation by key (`urlChave`, also printed on the DANFE).
    pub chave: String,
}

/// The company that wrote the emitting software (`infRespTec`, which several states require).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponsavelTecnico {
    /// Its CNPJ.
    pub cnpj: Cnpj,
    /// Whom to talk to.
    pub contato: String,
    /// E-mail.
    pub email: String,
    /// Telephone, digits only (6 to 14).
    pub fone: String,
}

/// A sale's note, before it is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nota {
    /// The store.
    pub emitente: Emitente,
    /// Production or homologação.
    pub ambiente: Ambiente,
    /// Série (0–999): one per till.
    pub serie: u16,
    /// Número in the série, allocated when the sale is paid.
    pub numero: u32,
    /// The code drawn for the key (eight digits), kept with the note: drawing it again would
    /// make another key.
    pub codigo_numerico: u32,
    /// Issue time (`dhEmi`), with the store's offset.
    pub emitida_em: OffsetDateTime,
    /// Normal or contingência.
    pub emissao: Emissao,
    /// What was sold.
    pub itens: Vec<Item>,
    /// How it was paid; cash over the total is change (`vTroco`).
    pub pagamentos: Vec<Pagamento>,
    /// The consumer's CPF, when asked for ("CPF na nota").
    pub consumidor: Option<Cpf>,
    /// The state's consultation addresses.
    pub urls: UrlsConsulta,
    /// `infRespTec`.
    pub responsavel_tecnico: Option<ResponsavelTecnico>,
    /// The software's name and version (`verProc`).
    pub versao_processo: String,
}

impl Nota {
    /// Its key.
    pub fn chave(&self) -> Result<Chave> {
        Chave::new(&PartesChave {
            uf: self.emitente.endereco.uf,
            ano_mes: (
                self.emitida_em.year() as u16,
                u8::from(self.emitida_em.month()),
            ),
            cnpj: &self.emitente.cnpj,
            serie: self.serie,
            numero: self.numero,
            tipo: self.emissao.tipo(),
            codigo_numerico: self.codigo_numerico,
        })
    }

    /// What the sale comes to (`vNF`), in centavos.
    pub fn total(&self) -> i64 {
        self.itens.iter().map(Item::total).sum()
    }

    /// Change given (`vTroco`): what was paid over the total, all of it in cash.
    pub fn troco(&self) -> Result<i64> {
        let pago: i64 = self.pagamentos.iter().map(|p| p.valor).sum();
        let troco = pago - self.total();
        if troco < 0 {
            return Err(NfceError::Sale(format!(
                "os pagamentos (R$ {}) não cobrem a venda (R$ {})",
                decimal::format(pago),
                decimal::format(self.total())
            )));
        }
        let dinheiro: i64 = (self.pagamentos.iter())
            .filter(|p| p.forma == Forma::Dinheiro)
            .map(|p| p.valor)
            .sum();
        if troco > dinheiro {
            return Err(NfceError::Sale(
                "troco maior que o pago em dinheiro".to_string(),
            ));
        }
        Ok(troco)
    }

    fn check(&self) -> Result<()> {
        if self.itens.is_empty() || self.itens.len() > 990 {
            return Err(NfceError::Sale("uma nota tem de 1 a 990 itens".to_string()));
        }
        if self.pagamentos.is_empty() || self.pagamentos.len() > 100 {
            return Err(NfceError::Sale(
                "uma nota tem de 1 a 100 pagamentos".to_string(),
            ));
        }
        for item in &self.itens {
            let ncm_ok = item.ncm.len() == 8 && item.ncm.bytes().all(|b| b.is_ascii_digit());
            if !ncm_ok || !(1000..=9999).contains(&item.cfop) || item.total() <= 0 {
                return Err(NfceError::Invalid("item", item.codigo.clone()));
            }
        }
        if let Emissao::Contingencia { justificativa, .. } = &self.emissao {
            let n = justificativa.trim().chars().count();
            if !(15..=256).contains(&n) {
                return Err(NfceError::Invalid(
                    "justificativa da contingência (15 a 256 caracteres)",
                    justificativa.clone(),
                ));
            }
        }
        self.troco().map(|_| ())
    }

    /// The `infNFe` element's content and its key; `Id` and `versao` are the caller's to write.
    pub(crate) fn inf_nfe(&self) -> Result<(Chave, String)> {
        self.check()?;
        let chave = self.chave()?;
        let mut x = Xml::default();
        self.ide(&mut x, &chave);
        self.emit(&mut x);
        self.dest(&mut x);
        for (n, item) in self.itens.iter().enumerate() {
            self.det(&mut x, n, item);
        }
        self.totals(&mut x);
        x.open("transp", &[]).leaf("modFrete", "9").close("transp");
        self.pag(&mut x)?;
        if let Some(r) = &self.responsavel_tecnico {
            x.open("infRespTec", &[])
                .leaf("CNPJ", r.cnpj.as_ref())
                .leaf("xContato", &r.contato)
                .leaf("email", &r.email)
                .leaf("fone", &r.fone)
                .close("infRespTec");
        }
        Ok((chave, x.finish()))
    }

    fn ide(&self, x: &mut Xml, chave: &Chave) {
        let e = &self.emitente.endereco;
        x.open("ide", &[])
            .leaf("cUF", &e.uf.codigo().to_string())
            .leaf("cNF", &format!("{:08}", self.codigo_numerico))
            .leaf("natOp", "VENDA")
            .leaf("mod", "65")
            .leaf("serie", &self.serie.to_string())
            .leaf("nNF", &self.numero.to_string())
            .leaf("dhEmi", &data_hora(self.emitida_em))
            .leaf("tpNF", "1")
            .leaf("idDest", "1")
            .leaf("cMunFG", &e.codigo_municipio.to_string())
            .leaf("tpImp", "4")
            .leaf("tpEmis", &self.emissao.tipo().codigo().to_string())
            .leaf("cDV", &chave.digito().to_string())
            .leaf("tpAmb", &self.ambiente.codigo().to_string())
            .leaf("finNFe", "1")
            .leaf("indFinal", "1")
            .leaf("indPres", "1")
            .leaf("procEmi", "0")
            .leaf("verProc", &self.versao_processo);
        if let Emissao::Contingencia {
            desde,
            justificativa,
        } = &self.emissao
        {
            x.leaf("dhCont", &data_hora(*desde))
                .leaf("xJust", justificativa.trim());
        }
        x.close("ide");
    }

    fn emit(&self, x: &mut Xml) {
        let (m, e) = (&self.emitente, &self.emitente.endereco);
        x.open("emit", &[])
            .leaf("CNPJ", m.cnpj.as_ref())
            .leaf("xNome", &m.razao_social)
            .opt("xFant", m.nome_fantasia.as_deref())
            .open("enderEmit", &[])
            .leaf("xLgr", &e.logradouro)
            .leaf("nro", &e.numero)
            .leaf("xBairro", &e.bairro)
            .leaf("cMun", &e.codigo_municipio.to_string())
            .leaf("xMun", &e.municipio)
            .leaf("UF", e.uf.sigla())
            .leaf("CEP", &e.cep)
            .leaf("cPais", "1058")
            .leaf("xPais", "Brasil")
            .close("enderEmit")
            .leaf("IE", &m.ie)
            // Simples Nacional.
            .leaf("CRT", "1")
            .close("emit");
    }

    fn dest(&self, x: &mut Xml) {
        let Some(cpf) = &self.consumidor else {
            return;
        };
        x.open("dest", &[]).leaf("CPF", cpf.as_ref());
        if self.ambiente == Ambiente::Homologacao {
            x.leaf(
                "xNome",
                "NF-E EMITIDA EM AMBIENTE DE HOMOLOGACAO - SEM VALOR FISCAL",
            );
        }
        // A consumer: not a contributor of ICMS.
        x.leaf("indIEDest", "9").close("dest");
    }

    /// The `xProd` of item `n` (from 0): in homologação the first one says the note has no
    /// fiscal value, as SEFAZ requires there; the DANFE prints the same.
    pub fn descricao_no_xml(&self, n: usize) -> &str {
        if n == 0 && self.ambiente == Ambiente::Homologacao {
            HOMOLOGACAO
        } else {
            &self.itens[n].descricao
        }
    }

    fn det(&self, x: &mut Xml, n: usize, item: &Item) {
        let descricao = self.descricao_no_xml(n);
        let quantidade = quantity(item.quantidade_milesimos);
        let unitario = decimal::format(item.valor_unitario);
        let total = decimal::format(item.total());
        x.open("det", &[("nItem", &(n + 1).to_string())])
            .open("prod", &[])
            .leaf("cProd", &item.codigo)
            .leaf("cEAN", "SEM GTIN")
            .leaf("xProd", descricao)
            .leaf("NCM", &item.ncm)
            .leaf("CFOP", &item.cfop.to_string())
            .leaf("uCom", &item.unidade)
            .leaf("qCom", &quantidade)
            .leaf("vUnCom", &unitario)
            .leaf("vProd", &total)
            .leaf("cEANTrib", "SEM GTIN")
            .leaf("uTrib", &item.unidade)
            .leaf("qTrib", &quantidade)
            .leaf("vUnTrib", &unitario)
            .leaf("indTot", "1")
            .close("prod")
            .open("imposto", &[])
            // Simples Nacional without credit: the ICMS is in the single monthly payment.
            .open("ICMS", &[])
            .open("ICMSSN102", &[])
            .leaf("orig", "0")
            .leaf("CSOSN", "102")
            .close("ICMSSN102")
            .close("ICMS");
        // PIS and COFINS of the Simples Nacional: "outras operações de saída", nothing here.
        for (group, inner, rate) in [
            ("PIS", "PISOutr", "pPIS"),
            ("COFINS", "COFINSOutr", "pCOFINS"),
        ] {
            x.open(group, &[])
                .open(inner, &[])
                .leaf("CST", "49")
                .leaf("vBC", "0.00")
                .leaf(rate, "0.0000")
                .leaf(&format!("v{group}"), "0.00")
                .close(inner)
                .close(group);
        }
        x.close("imposto").close("det");
    }

    fn totals(&self, x: &mut Xml) {
        let total = decimal::format(self.total());
        x.open("total", &[]).open("ICMSTot", &[]);
        for zero in [
            "vBC",
            "vICMS",
            "vICMSDeson",
            "vFCP",
            "vBCST",
            "vST",
            "vFCPST",
            "vFCPSTRet",
        ] {
            x.leaf(zero, "0.00");
        }
        x.leaf("vProd", &total);
        for zero in [
            "vFrete",
            "vSeg",
            "vDesc",
            "vII",
            "vIPI",
            "vIPIDevol",
            "vPIS",
            "vCOFINS",
            "vOutro",
        ] {
            x.leaf(zero, "0.00");
        }
        x.leaf("vNF", &total).close("ICMSTot").close("total");
    }

    fn pag(&self, x: &mut Xml) -> Result<()> {
        let troco = self.troco()?;
        x.open("pag", &[]);
        for p in &self.pagamentos {
            x.open("detPag", &[])
                .leaf("tPag", p.forma.codigo())
                .leaf("vPag", &decimal::format(p.valor));
            if p.forma.eletronica() {
                // Not integrated: the till does not pass the card network's authorization
                // code into the note.
                x.open("card", &[]).leaf("tpIntegra", "2").close("card");
            }
            x.close("detPag");
        }
        if troco > 0 {
            x.leaf("vTroco", &decimal::format(troco));
        }
        x.close("pag");
        Ok(())
    }
}

/// A quantity in thousandths as `qCom` writes it (four decimals).
fn quantity(milesimos: u64) -> String {
    format!("{}.{:03}0", milesimos / 1000, milesimos % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_rounds_half_up_to_the_centavo_and_quantities_keep_four_decimals() {
        let item = Item {
            codigo: "1".into(),
            descricao: "Banana".into(),
            ncm: "08039000".into(),
            cfop: 5102,
            unidade: "KG".into(),
            quantidade_milesimos: 1_235,
            valor_unitario: 599,
        };
        // 1,235 kg × R$ 5,99 = R$ 7,39765 → R$ 7,40.
        assert_eq!(item.total(), 740);
        assert_eq!(quantity(1_235), "1.2350");
        assert_eq!(quantity(1_000), "1.0000");
    }
}
