// Package clustermetrics exports the state of a cluster instance's tasks
// to Prometheus. It is apart from package metrics so that a job that uses
// metrics.Handler without package cluster links no Kafka client.
package clustermetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly/cluster"
)

// Collector is a prometheus.Collector of one cluster instance's
// tasks (cluster.Start), beside the collectors of its tasks' jobs:
//
//	exactly_cluster_task_parked{topic,partition}  1 per task parked on this instance now
//	exactly_cluster_parked_tasks                  tasks parked on this instance now
//	exactly_cluster_tasks_parked_total            tasks parked since the instance started
//
// Alert on exactly_cluster_parked_tasks > 0: a parked task's partition is
// kept but not processed until a rebalance takes it away. The task
// series is bounded by the partitions assigned to the instance.
type Collector struct {
	in                     *cluster.Instance
	task, parked, parkings *prometheus.Desc
}

// NewCollector returns a collector of in, an instance of the job
// named job (the value of every series' job_name label).
func NewCollector(job string, in *cluster.Instance) *Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("exactly_cluster_"+name, help, labels, prometheus.Labels{"job_name": job})
	}
	return &Collector{
		in:       in,
		task:     desc("task_parked", "1 for each task (input partition) that failed and is parked on this instance: its partition kept but not processed until a rebalance takes it away.", "topic", "partition"),
		parked:   desc("parked_tasks", "Tasks that failed and are parked on this instance now."),
		parkings: desc("tasks_parked_total", "Tasks parked on this instance since it started, including those a rebalance has taken away since."),
	}
}

// Describe sends the descriptors of every series c collects.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.task
	ch <- c.parked
	ch <- c.parkings
}

// Collect sends the current values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	parked := c.in.ParkedTasks()
	for _, p := range parked {
		ch <- prometheus.MustNewConstMetric(c.task, prometheus.GaugeValue, 1, p.Task.Topic, strconv.Itoa(int(p.Task.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(len(parked)))
	ch <- prometheus.MustNewConstMetric(c.parkings, prometheus.CounterValue, float64(c.in.TasksParked()))
}
