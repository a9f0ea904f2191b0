package safetensors_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/bitdecode/bitdecode/model/safetensors"
)

// Write a one-tensor file in memory, open it and convert the BF16 tensor to
// float32.
func Example() {
	var buf bytes.Buffer
	err := safetensors.Write(&buf, []safetensors.Tensor{{
		TensorInfo: safetensors.TensorInfo{Name: "model.norm.weight", DType: safetensors.BF16, Shape: []int{3}},
		Data:       []byte{0x80, 0x3f, 0x00, 0xc0, 0x80, 0x7f}, // 1, -2, +Inf as bf16, little-endian
	}}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}
	f, err := safetensors.OpenBytes("model.safetensors", buf.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	for _, info := range f.Tensors() {
		t, err := f.Tensor(info.Name)
		if err != nil {
			log.Fatal(err)
		}
		v, err := t.Float32()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(info.Name, info.DType, info.Shape, v)
	}
	// Output:
	// model.norm.weight BF16 [3] [1 -2 +Inf]
}

// Errors name the file and the tensor.
func ExampleOpenBytes_error() {
	header := `{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,8]}}`
	b := append([]byte{byte(len(header)), 0, 0, 0, 0, 0, 0, 0}, header...)
	b = append(b, make([]byte, 8)...)
	_, err := safetensors.OpenBytes("model.safetensors", b)
	fmt.Println(err)
	// Output:
	// safetensors: model.safetensors: tensor "w": data_offsets [0, 8] hold 8 bytes, but F32[2 2] needs 16
}
