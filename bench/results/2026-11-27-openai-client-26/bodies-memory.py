"""N clients at once, each posting a 4 MiB chat that cannot fit the context,
against a running server; prints the wall time and the server's peak RSS
(read from /proc/PID/status every 50 ms).

    python3 bodies-memory.py PORT N PID
"""
import socket, threading, time, json, sys, subprocess
P=int(sys.argv[1]); N=int(sys.argv[2]); pid=sys.argv[3]
body=json.dumps({"model":"gotiny","messages":[{"role":"user","content":"x"*4100000}]}).encode()
def one():
    s=socket.create_connection(("127.0.0.1",P))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"%len(body)+body)
    s.recv(200); s.close()
peak=[0]
stop=False
def mon():
    while not stop:
        rss=int(open("/proc/%s/status"%pid).read().split("VmRSS:")[1].split()[0])
        peak[0]=max(peak[0],rss); time.sleep(0.05)
m=threading.Thread(target=mon); m.start()
t=time.time()
ths=[threading.Thread(target=one) for _ in range(N)]
[x.start() for x in ths]; [x.join() for x in ths]
stop=True; m.join()
print("N=%d %.1fs peak RSS %d MiB"%(N,time.time()-t,peak[0]//1024))
