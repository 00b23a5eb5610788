"""An integrator's path: a client generated from the served OpenAPI document (by
openapi-python-client, nothing edited) pays, replays the same key, meets a 409 for a key in
progress, looks the payment up by referencia and by key, and pays by Pix.

Usage: python3 generated_client.py <api-url> <api-key>   (the generated package on PYTHONPATH)
"""

import sys
import threading
import time
import uuid

from pagar_payment_api_client import AuthenticatedClient
from pagar_payment_api_client.api.default import create_payment, get_payment, list_payments
from pagar_payment_api_client.models import NovoPagamento, PagamentoPix, Payment, Problem

url, api_key = sys.argv[1], sys.argv[2]
client = AuthenticatedClient(base_url=url, token=api_key, timeout=20.0)

# Pay, then send the same key and body again: the same payment, replayed.
key = str(uuid.uuid4())
body = NovoPagamento(valor=1234, cartao="tok_aprovado", referencia="venda-cliente-gerado")
first = create_payment.sync_detailed(client=client, body=body, idempotency_key=key)
assert first.status_code == 201, first
assert isinstance(first.parsed, Payment) and first.parsed.status == "aprovado", first.parsed
again = create_payment.sync_detailed(client=client, body=body, idempotency_key=key)
assert again.status_code == 201, again
assert again.headers.get("Idempotent-Replayed") == "true", again.headers
assert again.parsed.id == first.parsed.id
assert again.content == first.content, "replayed byte for byte"

# A key still executing (a slow card): the second request gets a 409 problem with Retry-After.
slow_key = str(uuid.uuid4())
slow = NovoPagamento(valor=500, cartao="tok_lento")
answers = []
worker = threading.Thread(
    target=lambda: answers.append(
        create_payment.sync_detailed(client=client, body=slow, idempotency_key=slow_key)
    )
)
worker.start()
time.sleep(0.3)
busy = create_payment.sync_detailed(client=client, body=slow, idempotency_key=slow_key)
worker.join()
assert busy.status_code == 409, busy
assert isinstance(busy.parsed, Problem) and busy.parsed.retryable, busy.parsed
assert int(busy.headers["Retry-After"]) >= 1, busy.headers
assert answers[0].status_code == 201, answers

# A refused request is a Problem too.
bad = create_payment.sync_detailed(
    client=client, body=NovoPagamento(valor=0, cartao="tok_aprovado"), idempotency_key=str(uuid.uuid4())
)
assert bad.status_code == 422 and isinstance(bad.parsed, Problem), bad

# The look-ups a client uses to resolve an unknown outcome.
by_ref = list_payments.sync(client=client, referencia="venda-cliente-gerado")
assert [p.id for p in by_ref.pagamentos] == [first.parsed.id], by_ref
by_key = list_payments.sync(client=client, idempotency_key=key)
assert [p.id for p in by_key.pagamentos] == [first.parsed.id], by_key
one = get_payment.sync(client=client, id=first.parsed.id)
assert one.valor == 1234 and one.referencia == "venda-cliente-gerado", one

# Pix: answered `aguardando` with the QR's text, replayed byte for byte; the state is read later.
pix_key = str(uuid.uuid4())
pix_body = NovoPagamento(valor=990, metodo="pix", referencia="venda-pix-cliente-gerado")
pix = create_payment.sync_detailed(client=client, body=pix_body, idempotency_key=pix_key)
assert pix.status_code == 201, pix
assert isinstance(pix.parsed, PagamentoPix) and pix.parsed.status == "aguardando", pix.parsed
assert pix.parsed.pix.copia_e_cola.startswith("000201"), pix.parsed.pix
pix_again = create_payment.sync_detailed(client=client, body=pix_body, idempotency_key=pix_key)
assert pix_again.content == pix.content and pix_again.headers.get("Idempotent-Replayed") == "true"
read = get_payment.sync(client=client, id=pix.parsed.id)
assert isinstance(read, PagamentoPix) and read.pix.txid == pix.parsed.pix.txid, read
print("generated client: ok")
