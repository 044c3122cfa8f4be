"""Events of the echo test protocol."""

from testbed.nodes.runtime.events import declare

P = "echo"
declare("echo_send", P, "An echo node sent a ping (t = the send call).", dst="str", seq="int", size="int")
declare("echo_recv", P, "An echo node received a ping or pong.",
        src="str", seq="int", sent_t="int", kind="str")
