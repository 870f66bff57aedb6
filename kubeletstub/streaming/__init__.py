"""The streaming protocols of the kubelet API: WebSocket framing (RFC 6455) and kube's channel
protocols on top of it (k8s.io/apimachinery/pkg/util/httpstream/wsstream, pkg/util/remotecommand).

Pure framing and small asyncio helpers over a (StreamReader, StreamWriter) pair; what runs behind the
channels (a process, a port) is the kubelet API's (`kubeletstub/server.py`). The API server relays
these frames without understanding more than the WebSocket layer (`apiserver/nodeproxy.py`).
"""
