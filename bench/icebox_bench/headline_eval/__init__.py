"""The headline benchmark (issue 21 §3): the busiest hour of the Azure 2019 sample, scaled to
this node and mapped onto Python, Node.js and Java functions, replayed open loop on a fresh
iceboxd per mode (openwhisk, icebox-default, each technique alone, auto). docs/headline.md."""
